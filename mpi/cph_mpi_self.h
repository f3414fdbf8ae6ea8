// The names of mpi.h that package mpi's Go files use, for the mpiself build (cgo_self.go), which has no MPI.
#ifndef CPH_MPI_SELF_H
#define CPH_MPI_SELF_H

typedef int MPI_Fint;
#define MPI_SUCCESS 0
double MPI_Wtime(void);

#endif
