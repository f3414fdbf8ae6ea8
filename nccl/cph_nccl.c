/* cph_nccl.c: dlopen of libnccl.so.2 and trampolines through its entry points (Go cannot call a C function
 * pointer itself). Nothing here links NCCL, CUDA or MPI. */
#include "cph_nccl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* lookup finds one symbol; a required one that is missing fails the open with dlerror()'s text. */
static int lookup(cph_nccl *lib, const char *name, void **fn, int required, char *err, size_t err_bytes)
{
	dlerror();
	*fn = dlsym(lib->handle, name);
	if (*fn != NULL || !required)
		return 0;
	const char *why = dlerror();
	snprintf(err, err_bytes, "missing NCCL entry point %s: %s", name, why != NULL ? why : "symbol is NULL");
	return -1;
}

int cph_nccl_open(const char *path, cph_nccl *lib, char *err, size_t err_bytes)
{
	memset(lib, 0, sizeof *lib);
	/* RTLD_LOCAL: two loaded NCCLs (a real one and a test shim) must not resolve each other's symbols.
	 * RTLD_NODELETE: NVIDIA's NCCL leaves threads of its own running after its last communicator is destroyed
	 * (the RAS thread of NCCL 2.24 and later, the proxy threads until they notice), so unmapping it at dlclose
	 * could pull their code from under them. The library stays mapped until the process exits, and a later
	 * Load of the same file finds it loaded, its one-time set-up already done. */
	lib->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (lib->handle == NULL) {
		const char *why = dlerror();
		snprintf(err, err_bytes, "%s", why != NULL ? why : "dlopen failed");
		return -1;
	}
	struct {
		const char *name;
		void **fn;
		int required;
	} symbols[] = {
		{"ncclGetVersion", (void **)&lib->get_version, 1},
		{"ncclGetUniqueId", (void **)&lib->get_unique_id, 1},
		{"ncclCommInitRank", (void **)&lib->comm_init_rank, 1},
		{"ncclCommInitRankConfig", (void **)&lib->comm_init_rank_config, 0},
		{"ncclCommGetAsyncError", (void **)&lib->comm_get_async_error, 1},
		{"ncclCommDestroy", (void **)&lib->comm_destroy, 1},
		{"ncclCommAbort", (void **)&lib->comm_abort, 1},
		{"ncclAllReduce", (void **)&lib->all_reduce, 1},
		{"ncclGetErrorString", (void **)&lib->get_error_string, 1},
		{"ncclGetLastError", (void **)&lib->get_last_error, 0},
		{"ncclRedOpCreatePreMulSum", (void **)&lib->redop_create_premulsum, 0},
		{"ncclRedOpDestroy", (void **)&lib->redop_destroy, 0},
	};
	for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
		if (lookup(lib, symbols[i].name, symbols[i].fn, symbols[i].required, err, err_bytes) != 0) {
			cph_nccl_close(lib);
			return -1;
		}
	}
	return 0;
}

/* cph_nccl_is_mapped reports whether the library at path is loaded in this process, without loading it. */
int cph_nccl_is_mapped(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
	if (h == NULL)
		return 0;
	dlclose(h);
	return 1;
}

void cph_nccl_close(cph_nccl *lib)
{
	if (lib->handle != NULL)
		dlclose(lib->handle);
	memset(lib, 0, sizeof *lib);
}

ncclResult_t cph_nccl_get_version(const cph_nccl *lib, int *version) { return lib->get_version(version); }

ncclResult_t cph_nccl_get_unique_id(const cph_nccl *lib, ncclUniqueId *id) { return lib->get_unique_id(id); }

/* The unique id arrives by pointer from Go and is passed on by value, as ncclCommInitRank takes it. */
ncclResult_t cph_nccl_comm_init_rank(const cph_nccl *lib, ncclComm_t *comm, int nranks, const ncclUniqueId *id,
                                     int rank)
{
	return lib->comm_init_rank(comm, nranks, *id, rank);
}

/* The non-blocking init: ncclCommInitRankConfig with blocking = 0 returns at once (ncclInProgress while NCCL's
 * own thread connects the ranks), and ncclCommGetAsyncError says when it is done. Only called when the library
 * has ncclCommInitRankConfig. */
ncclResult_t cph_nccl_comm_init_rank_nonblocking(const cph_nccl *lib, ncclComm_t *comm, int nranks,
                                                const ncclUniqueId *id, int rank)
{
	cph_nccl_config_v21400 config;
	memset(&config, 0, sizeof config);
	config.size = sizeof config;
	config.magic = CPH_NCCL_CONFIG_MAGIC;
	config.version = CPH_NCCL_CONFIG_VERSION;
	config.blocking = 0;
	return lib->comm_init_rank_config(comm, nranks, *id, rank, &config);
}

ncclResult_t cph_nccl_comm_get_async_error(const cph_nccl *lib, ncclComm_t comm, ncclResult_t *async_error)
{
	return lib->comm_get_async_error(comm, async_error);
}

ncclResult_t cph_nccl_comm_destroy(const cph_nccl *lib, ncclComm_t comm) { return lib->comm_destroy(comm); }

ncclResult_t cph_nccl_comm_abort(const cph_nccl *lib, ncclComm_t comm) { return lib->comm_abort(comm); }

/* Buffers and the stream arrive as integers: they are device addresses and a CUDA handle, never Go memory. */
ncclResult_t cph_nccl_all_reduce(const cph_nccl *lib, uintptr_t send, uintptr_t recv, size_t count,
                                 ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm, uintptr_t stream)
{
	return lib->all_reduce((const void *)send, (void *)recv, count, type, op, comm, (cudaStream_t)stream);
}

/* The scalar is passed as a host value (ncclScalarHostImmediate): NCCL reads it during the call, so a local is
 * enough. */
ncclResult_t cph_nccl_redop_create_premulsum_u64(const cph_nccl *lib, ncclRedOp_t *op, uint64_t scalar,
                                                ncclComm_t comm)
{
	return lib->redop_create_premulsum(op, &scalar, 5 /* ncclUint64 */, CPH_NCCL_SCALAR_HOST_IMMEDIATE, comm);
}

ncclResult_t cph_nccl_redop_destroy(const cph_nccl *lib, ncclRedOp_t op, ncclComm_t comm)
{
	return lib->redop_destroy(op, comm);
}

const char *cph_nccl_error_string(const cph_nccl *lib, ncclResult_t result)
{
	return lib->get_error_string(result);
}

const char *cph_nccl_last_error(const cph_nccl *lib, ncclComm_t comm)
{
	return lib->get_last_error != NULL ? lib->get_last_error(comm) : NULL;
}
