/* A public check: cc -O2 -I. check.c solution.c -o check && ./check 512
 * Compares your matmul with the textbook loop on random matrices and prints both times.
 * The grader does the same with its own seeds, sizes and reference build. */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <time.h>
#include "matmul.h"

static void naive(int n, const double *a, const double *b, double *c) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0.0;
            for (int k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 512;
    double *a = malloc(sizeof(double) * n * n), *b = malloc(sizeof(double) * n * n);
    double *c = malloc(sizeof(double) * n * n), *r = malloc(sizeof(double) * n * n);
    srand(1);
    for (int i = 0; i < n * n; i++) { a[i] = rand() / (double)RAND_MAX - 0.5; b[i] = rand() / (double)RAND_MAX - 0.5; }
    double t0 = now(); naive(n, a, b, r); double t1 = now(); matmul(n, a, b, c); double t2 = now();
    double err = 0.0;
    for (int i = 0; i < n * n; i++) err = fmax(err, fabs(c[i] - r[i]));
    printf("n=%d max_abs_err=%.3g reference_s=%.4f yours_s=%.4f speedup=%.2f\n", n, err, t1 - t0, t2 - t1, (t1 - t0) / (t2 - t1));
    return err > 1e-9 * n ? 1 : 0;
}
