// Package cudadriver loads the CUDA driver (libcuda.so.1) when gorgonia.org/cu first calls cuInit,
// instead of at the process's start, so that the cuda build starts on a machine with no driver or
// no GPU: its --help, version, topo, sim, gen-trace and l3 commands work there, and a command that
// needs the GPU says in one line what is missing (Missing). gorgonia.org/cu stays the CUDA binding:
// this package only defines the driver's entry points that cu and kernels call (symbols.h) as jumps
// into the library it loads (load.c, trampolines_amd64.S), and swallows the failure of the first
// cuInit, cu's package initialiser's, which would otherwise exit the process. Import it (for its
// side effect) from every package that imports gorgonia.org/cu. In the CPU build it is empty. It
// must not import anything of this module.
package cudadriver
