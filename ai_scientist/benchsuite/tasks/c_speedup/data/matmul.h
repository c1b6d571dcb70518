/* The function a solution implements: C = A * B for n x n row-major matrices of doubles.
 * C is overwritten (not accumulated into). n is a multiple of 8 and at most 1024. */
void matmul(int n, const double *a, const double *b, double *c);
