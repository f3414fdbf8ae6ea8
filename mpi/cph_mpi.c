// C side of the mpi package: every function returns MPI's own code so Go can check it.
#include "cph_mpi.h"

// Handles cross the Go/C boundary as Fortran integers so that Go never sees MPI_Comm's representation.
//
// The conversion back is cached: OpenMPI's MPI_Comm_f2c takes a lock whenever MPI runs above
// MPI_THREAD_SINGLE (about 26 ns here, a fortieth of a one-element all-reduce, paid on every collective).
// An entry is filled on first use, dropped when its communicator is freed and again when MPI hands out an
// integer for a new one, so a reused integer never finds a stale entry. Only the FUNNELED thread calls in here,
// so the cache needs no lock.
#define CPH_COMM_CACHE 64
static MPI_Comm cph_comm_cache[CPH_COMM_CACHE];
static int cph_comm_cached[CPH_COMM_CACHE];

static MPI_Comm cph_comm(MPI_Fint f) {
	if (f < 0 || f >= CPH_COMM_CACHE) return MPI_Comm_f2c(f);
	if (!cph_comm_cached[f]) {
		MPI_Comm comm = MPI_Comm_f2c(f);
		if (comm == MPI_COMM_NULL) return comm; // not a live communicator: nothing to remember
		cph_comm_cache[f] = comm;
		cph_comm_cached[f] = 1;
	}
	return cph_comm_cache[f];
}

static void cph_comm_forget(MPI_Fint f) {
	if (f >= 0 && f < CPH_COMM_CACHE) cph_comm_cached[f] = 0;
}

static MPI_Op cph_op(int op) {
	switch (op) {
	case CPH_MIN: return MPI_MIN;
	case CPH_MAX: return MPI_MAX;
	default:      return MPI_SUM;
	}
}

static MPI_Datatype cph_type(int t) { return t == CPH_UINT64 ? MPI_UINT64_T : MPI_INT64_T; }

int cph_init(int *provided) {
	int flag = 0;
	int rc = MPI_Initialized(&flag);
	if (rc != MPI_SUCCESS) return rc;
	if (flag) return MPI_Query_thread(provided);
	rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, provided);
	if (rc != MPI_SUCCESS) return rc;
	return MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

int cph_finalized(int *flag) { return MPI_Finalized(flag); }
int cph_initialized(int *flag) { return MPI_Initialized(flag); }
int cph_finalize(void) { return MPI_Finalize(); }
MPI_Fint cph_world(void) { return MPI_Comm_c2f(MPI_COMM_WORLD); }
int cph_thread_funneled(void) { return MPI_THREAD_FUNNELED; }

int cph_rank(MPI_Fint c, int *rank) { return MPI_Comm_rank(cph_comm(c), rank); }
int cph_size(MPI_Fint c, int *size) { return MPI_Comm_size(cph_comm(c), size); }

int cph_split(MPI_Fint c, int color, int key, MPI_Fint *out) {
	MPI_Comm nc;
	int rc = MPI_Comm_split(cph_comm(c), color, key, &nc);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Comm_set_errhandler(nc, MPI_ERRORS_RETURN);
	*out = MPI_Comm_c2f(nc);
	cph_comm_forget(*out);
	return rc;
}

int cph_split_shared(MPI_Fint c, int key, MPI_Fint *out) {
	MPI_Comm nc;
	int rc = MPI_Comm_split_type(cph_comm(c), MPI_COMM_TYPE_SHARED, key, MPI_INFO_NULL, &nc);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Comm_set_errhandler(nc, MPI_ERRORS_RETURN);
	*out = MPI_Comm_c2f(nc);
	cph_comm_forget(*out);
	return rc;
}

int cph_free(MPI_Fint c) {
	MPI_Comm comm = cph_comm(c);
	cph_comm_forget(c);
	return MPI_Comm_free(&comm);
}

int cph_barrier(MPI_Fint c) { return MPI_Barrier(cph_comm(c)); }

int cph_allreduce(MPI_Fint c, uintptr_t send_addr, uintptr_t recv_addr, int count, int type, int op) {
	void *send = (void *)send_addr, *recv = (void *)recv_addr;
	const void *s = send == recv ? MPI_IN_PLACE : send;
	return MPI_Allreduce(s, recv, count, cph_type(type), cph_op(op), cph_comm(c));
}

int cph_allgather(MPI_Fint c, void *send, void *recv, int count, int type) {
	MPI_Datatype dt = type < 0 ? MPI_BYTE : cph_type(type);
	return MPI_Allgather(send, count, dt, recv, count, dt, cph_comm(c));
}

int cph_bcast(MPI_Fint c, void *buf, int count, int root) {
	return MPI_Bcast(buf, count, MPI_BYTE, root, cph_comm(c));
}

int cph_abort(MPI_Fint c, int code) { return MPI_Abort(cph_comm(c), code); }

int cph_processor_name(char *buf, int *len) { return MPI_Get_processor_name(buf, len); }
int cph_max_processor_name(void) { return MPI_MAX_PROCESSOR_NAME; }

void cph_error_string(int code, char *buf, int *len) {
	if (MPI_Error_string(code, buf, len) != MPI_SUCCESS) *len = 0;
}
int cph_max_error_string(void) { return MPI_MAX_ERROR_STRING; }

int cph_version(int *major, int *minor) { return MPI_Get_version(major, minor); }
int cph_library_version(char *buf, int *len) { return MPI_Get_library_version(buf, len); }
int cph_max_library_version(void) { return MPI_MAX_LIBRARY_VERSION_STRING; }
