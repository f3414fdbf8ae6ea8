/* ncclshim.c: a stand-in libnccl.so.2 for testing package nccl without a GPU.
 *
 * It exports the NCCL entry points package nccl looks up, with NCCL's ABI (nccl.h's types and values), and
 * implements them with MPI on HOST memory: a communicator is an MPI communicator, an all-reduce is
 * MPI_Allreduce, the CUDA stream is ignored (every call completes before it returns). Strings start with
 * "ncclshim: " so that tests can tell the library's text from the binding's.
 *
 * Limits, on purpose: MPI must already be initialised by the host process (cphicache's mpi package does it);
 * ncclCommInitRank splits MPI_COMM_WORLD, so, unlike real NCCL, every world rank must call it at the same
 * time (each with its own group's unique id). The unique id's bytes pick the MPI_Comm_split color, so ranks
 * holding different ids end up in different, independent communicators.
 *
 * Non-blocking communicators (ncclCommInitRankConfig with config->blocking = 0) behave as NVIDIA's do, as far
 * as the caller can tell: the init does its MPI work at once but reports ncclInProgress, and
 * ncclCommGetAsyncError reports ncclInProgress for NCCLSHIM_INIT_POLLS more polls (default 3) before
 * ncclSuccess; each all-reduce on such a communicator returns ncclInProgress once, then one poll of
 * ncclCommGetAsyncError shows it done. The config is checked as NCCL checks it, and stricter: it must be the
 * NCCL 2.14 layout (size, magic, version 2.14.0, blocking), which is what package nccl passes.
 *
 * Knobs for tests, read from the environment at each call: NCCLSHIM_VERSION_CODE overrides the version
 * ncclGetVersion reports; NCCLSHIM_INIT_POLLS (above); NCCLSHIM_INIT_HANG=1 keeps a non-blocking init in
 * progress until the communicator is aborted, as a peer that never arrives would.
 * Built with -DNCCLSHIM_LEGACY it poses as NCCL 2.7.8, which has no ncclGetLastError, no
 * ncclCommInitRankConfig and no ncclRedOpCreatePreMulSum.
 *
 * Custom reductions: ncclRedOpCreatePreMulSum for int64 and uint64 with a host-immediate scalar, as operator
 * values from 5 (ncclNumOps) on; an all-reduce with one multiplies each rank's values by the scalar (wrapping)
 * and sums them.
 *
 * Build: mpicc -shared -fPIC -Wl,-soname,libnccl.so.2 -o libnccl.so.2 ncclshim.c */
#include <mpi.h>

#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef struct ncclComm *ncclComm_t;
typedef void *cudaStream_t;
typedef struct {
	char internal[128];
} ncclUniqueId;

typedef enum {
	ncclSuccess = 0,
	ncclUnhandledCudaError = 1,
	ncclSystemError = 2,
	ncclInternalError = 3,
	ncclInvalidArgument = 4,
	ncclInvalidUsage = 5,
	ncclRemoteError = 6,
	ncclInProgress = 7,
	ncclTimeout = 8,
} ncclResult_t;

typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;

typedef enum {
	ncclInt8 = 0,
	ncclUint8 = 1,
	ncclInt32 = 2,
	ncclUint32 = 3,
	ncclInt64 = 4,
	ncclUint64 = 5,
	ncclFloat16 = 6,
	ncclFloat32 = 7,
	ncclFloat64 = 8,
} ncclDataType_t;

#ifdef NCCLSHIM_LEGACY
#define SHIM_VERSION_CODE 2708 /* 2.7.8, in the pre-2.9 encoding */
#else
#define SHIM_VERSION_CODE 22105 /* 2.21.5 */
#endif

static const char shim_magic[8] = {'n', 'c', 'c', 'l', 's', 'h', 'i', 'm'};

struct ncclComm {
	MPI_Comm comm;
	int nranks;
	int rank;
	int non_blocking;
	int pending_polls; /* ncclCommGetAsyncError answers ncclInProgress this many more times; -1: until aborted */
};

/* ncclConfig_t of NCCL 2.14 (ncclConfig_v21400). */
typedef struct {
	size_t size;
	unsigned int magic;
	unsigned int version;
	int blocking;
} ncclConfig_t;

static char last_error[256];

/* fail records why a call failed, for ncclGetLastError, and returns the code. */
__attribute__((format(printf, 2, 3))) static ncclResult_t fail(ncclResult_t code, const char *fmt, ...)
{
	va_list args;
	va_start(args, fmt);
	vsnprintf(last_error, sizeof last_error, fmt, args);
	va_end(args);
	return code;
}

static ncclResult_t mpi_fail(const char *call, int rc)
{
	char msg[MPI_MAX_ERROR_STRING];
	int n = 0;
	MPI_Error_string(rc, msg, &n);
	snprintf(last_error, sizeof last_error, "%s: %.*s", call, n, msg);
	return ncclSystemError;
}

EXPORT const char *ncclGetErrorString(ncclResult_t code)
{
	switch (code) {
	case ncclSuccess:
		return "ncclshim: no error";
	case ncclUnhandledCudaError:
		return "ncclshim: unhandled cuda error";
	case ncclSystemError:
		return "ncclshim: unhandled system error";
	case ncclInternalError:
		return "ncclshim: internal error";
	case ncclInvalidArgument:
		return "ncclshim: invalid argument";
	case ncclInvalidUsage:
		return "ncclshim: invalid usage";
	case ncclRemoteError:
		return "ncclshim: remote process exited or there was a network error";
	case ncclInProgress:
		return "ncclshim: operation in progress";
	case ncclTimeout:
		return "ncclshim: timeout";
	}
	return "ncclshim: unknown result code";
}

#ifndef NCCLSHIM_LEGACY
EXPORT const char *ncclGetLastError(ncclComm_t comm)
{
	(void)comm;
	return last_error;
}
#endif

EXPORT ncclResult_t ncclGetVersion(int *version)
{
	if (version == NULL)
		return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
	const char *override = getenv("NCCLSHIM_VERSION_CODE");
	*version = override != NULL ? atoi(override) : SHIM_VERSION_CODE;
	return ncclSuccess;
}

static int mpi_ready(void)
{
	int initialized = 0, finalized = 0;
	MPI_Initialized(&initialized);
	MPI_Finalized(&finalized);
	return initialized && !finalized;
}

/* An id is the magic, the maker's world rank and pid, and a per-process counter: unique over the job. */
EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
	static uint64_t made;
	if (id == NULL)
		return fail(ncclInvalidArgument, "ncclGetUniqueId: id is NULL");
	if (!mpi_ready())
		return fail(ncclSystemError, "ncclGetUniqueId: MPI is not initialised");
	int world_rank = 0;
	MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
	int64_t fields[3] = {world_rank, (int64_t)getpid(), (int64_t)++made};
	memset(id, 0, sizeof *id);
	memcpy(id->internal, shim_magic, sizeof shim_magic);
	memcpy(id->internal + sizeof shim_magic, fields, sizeof fields);
	return ncclSuccess;
}

/* id_color hashes the id (FNV-1a) into a non-negative MPI_Comm_split color. A collision would merge two
 * groups; check_members catches it. */
static int id_color(const ncclUniqueId *id)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < sizeof id->internal; i++)
		h = (h ^ (unsigned char)id->internal[i]) * 16777619u;
	return (int)(h & 0x7fffffff);
}

/* check_members verifies the split: every member holds the same id, the group has nranks members and this
 * process sits at the rank it asked for. All members reach the same verdict on the first two checks. */
static ncclResult_t check_members(MPI_Comm comm, const ncclUniqueId *id, int nranks, int rank)
{
	int size = 0, got_rank = 0, rc;
	MPI_Comm_size(comm, &size);
	MPI_Comm_rank(comm, &got_rank);
	if (size != nranks)
		return fail(ncclInvalidUsage, "ncclCommInitRank: %d ranks hold this unique id, nranks is %d", size,
		            nranks);
	char *ids = malloc((size_t)size * sizeof id->internal);
	if (ids == NULL)
		return fail(ncclSystemError, "ncclCommInitRank: out of memory");
	rc = MPI_Allgather(id->internal, sizeof id->internal, MPI_BYTE, ids, sizeof id->internal, MPI_BYTE, comm);
	int same = 1;
	for (int i = 0; rc == MPI_SUCCESS && i < size; i++)
		same = same && memcmp(ids + (size_t)i * sizeof id->internal, id->internal, sizeof id->internal) == 0;
	free(ids);
	if (rc != MPI_SUCCESS)
		return mpi_fail("ncclCommInitRank: MPI_Allgather", rc);
	if (!same)
		return fail(ncclInternalError, "ncclCommInitRank: unique id hash collision (%d ranks)", size);
	if (got_rank != rank)
		return fail(ncclInvalidUsage, "ncclCommInitRank: rank %d given twice or skipped (got %d)", rank,
		            got_rank);
	return ncclSuccess;
}


EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank)
{
	if (out == NULL)
		return fail(ncclInvalidArgument, "ncclCommInitRank: comm is NULL");
	*out = NULL;
	if (nranks < 1 || rank < 0 || rank >= nranks)
		return fail(ncclInvalidArgument, "ncclCommInitRank: rank %d outside [0, %d)", rank, nranks);
	if (memcmp(id.internal, shim_magic, sizeof shim_magic) != 0)
		return fail(ncclInvalidArgument, "ncclCommInitRank: not an ncclshim unique id");
	if (!mpi_ready())
		return fail(ncclSystemError, "ncclCommInitRank: MPI is not initialised");
	MPI_Comm comm;
	int rc = MPI_Comm_split(MPI_COMM_WORLD, id_color(&id), rank, &comm);
	if (rc != MPI_SUCCESS)
		return mpi_fail("ncclCommInitRank: MPI_Comm_split", rc);
	MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
	ncclResult_t res = check_members(comm, &id, nranks, rank);
	struct ncclComm *c = res == ncclSuccess ? malloc(sizeof *c) : NULL;
	if (c == NULL) {
		MPI_Comm_free(&comm);
		return res != ncclSuccess ? res : fail(ncclSystemError, "ncclCommInitRank: out of memory");
	}
	c->comm = comm;
	c->nranks = nranks;
	c->rank = rank;
	c->non_blocking = 0;
	c->pending_polls = 0;
	*out = c;
	return ncclSuccess;
}

#ifndef NCCLSHIM_LEGACY
static int env_int(const char *name, int fallback)
{
	const char *v = getenv(name);
	return v != NULL && *v != '\0' ? atoi(v) : fallback;
}

EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *out, int nranks, ncclUniqueId id, int rank,
                                           ncclConfig_t *config)
{
	if (config != NULL) {
		if (config->magic != 0xcafebeefu)
			return fail(ncclInvalidArgument, "ncclCommInitRankConfig: config magic %#x, not NCCL_API_MAGIC",
			            config->magic);
		if (config->size != sizeof(ncclConfig_t) || config->version != 21400)
			return fail(ncclInvalidArgument,
			            "ncclCommInitRankConfig: config of %zu bytes, version %u: want the NCCL 2.14 layout "
			            "(%zu bytes, version 21400)",
			            config->size, config->version, sizeof(ncclConfig_t));
		if (config->blocking != 0 && config->blocking != 1)
			return fail(ncclInvalidArgument, "ncclCommInitRankConfig: blocking = %d", config->blocking);
	}
	ncclResult_t res = ncclCommInitRank(out, nranks, id, rank);
	if (res != ncclSuccess || config == NULL || config->blocking != 0)
		return res;
	(*out)->non_blocking = 1;
	(*out)->pending_polls = env_int("NCCLSHIM_INIT_HANG", 0) == 1 ? -1 : env_int("NCCLSHIM_INIT_POLLS", 3);
	return ncclInProgress;
}
#endif

EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error)
{
	if (comm == NULL || async_error == NULL)
		return fail(ncclInvalidArgument, "ncclCommGetAsyncError: %s is NULL", comm == NULL ? "comm" : "asyncError");
	if (comm->pending_polls != 0) {
		if (comm->pending_polls > 0)
			comm->pending_polls--;
		*async_error = ncclInProgress;
		return ncclSuccess;
	}
	*async_error = ncclSuccess;
	return ncclSuccess;
}

static ncclResult_t release(const char *call, ncclComm_t comm)
{
	if (comm == NULL)
		return fail(ncclInvalidArgument, "%s: comm is NULL", call);
	int rc = MPI_Comm_free(&comm->comm);
	free(comm);
	return rc == MPI_SUCCESS ? ncclSuccess : mpi_fail(call, rc);
}

EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) { return release("ncclCommDestroy", comm); }

EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) { return release("ncclCommAbort", comm); }

static MPI_Datatype mpi_type(ncclDataType_t type)
{
	switch (type) {
	case ncclInt8:
		return MPI_INT8_T;
	case ncclUint8:
		return MPI_UINT8_T;
	case ncclInt32:
		return MPI_INT32_T;
	case ncclUint32:
		return MPI_UINT32_T;
	case ncclInt64:
		return MPI_INT64_T;
	case ncclUint64:
		return MPI_UINT64_T;
	case ncclFloat32:
		return MPI_FLOAT;
	case ncclFloat64:
		return MPI_DOUBLE;
	default:
		return MPI_DATATYPE_NULL;
	}
}

static MPI_Op mpi_op(ncclRedOp_t op)
{
	switch (op) {
	case ncclSum:
		return MPI_SUM;
	case ncclProd:
		return MPI_PROD;
	case ncclMax:
		return MPI_MAX;
	case ncclMin:
		return MPI_MIN;
	default:
		return MPI_OP_NULL;
	}
}

#include "ncclshim_redop.h"

EXPORT ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                                  ncclComm_t comm, cudaStream_t stream)
{
	(void)stream; /* host memory: the call completes before it returns */
	if (comm == NULL)
		return fail(ncclInvalidArgument, "ncclAllReduce: comm is NULL");
	if (mpi_type(type) == MPI_DATATYPE_NULL)
		return fail(ncclInvalidArgument, "ncclAllReduce: unsupported data type %d", (int)type);
	int custom = custom_index(op) >= 0;
	if (mpi_op(op) == MPI_OP_NULL && !custom)
		return fail(ncclInvalidArgument, "ncclAllReduce: unsupported operator %d", (int)op);
	if (count > INT_MAX)
		return fail(ncclInvalidArgument, "ncclAllReduce: count %zu exceeds MPI's int", count);
	if (count == 0)
		return ncclSuccess;
	if (send == NULL || recv == NULL)
		return fail(ncclInvalidArgument, "ncclAllReduce: %s buffer is NULL", send == NULL ? "send" : "recv");
	if (comm->pending_polls != 0)
		return fail(ncclInvalidUsage, "ncclAllReduce: the communicator is still in progress (poll ncclCommGetAsyncError first)");
	if (custom) {
		if (premul(send, recv, count, type, op) != 0)
			return fail(ncclInvalidArgument, "ncclAllReduce: custom operator %d on data type %d", (int)op, (int)type);
		send = recv; /* the multiplied values, summed in place */
	}
	int rc = MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, (int)count, mpi_type(type),
	                       custom ? MPI_SUM : mpi_op(op), comm->comm);
	if (rc != MPI_SUCCESS)
		return mpi_fail("ncclAllReduce: MPI_Allreduce", rc);
	if (comm->non_blocking) {
		comm->pending_polls = 1;
		return ncclInProgress;
	}
	return ncclSuccess;
}
