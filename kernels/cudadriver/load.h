// load.h: what Go asks of load.c.
#ifndef CPH_CUDA_LOAD_H
#define CPH_CUDA_LOAD_H
// cph_cuda_missing is why the driver cannot be used (no libcuda.so.1, or cuInit's error), or NULL when it can.
const char *cph_cuda_missing(void);
#endif
