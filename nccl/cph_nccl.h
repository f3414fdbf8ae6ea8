/* cph_nccl.h: the few NCCL declarations cphicache needs, written out here because nccl.h is not installed
 * where cphicache is built. Values and signatures follow NVIDIA/nccl src/nccl.h.in; C enums are int-sized on
 * every ABI NCCL supports (NCCL pins ncclRedOp_t to the size of an int for that reason), so int typedefs are
 * ABI-compatible. */
#ifndef CPH_NCCL_H
#define CPH_NCCL_H

#include <stddef.h>
#include <stdint.h>

typedef struct ncclComm *ncclComm_t;
typedef void *cudaStream_t;

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
	char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef int ncclResult_t;   /* ncclSuccess = 0, ... */
typedef int ncclDataType_t; /* ncclInt64 = 4, ncclUint64 = 5 */
typedef int ncclRedOp_t;    /* ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3; custom ones from 5 on */
typedef int ncclScalarResidence_t; /* ncclScalarDevice = 0, ncclScalarHostImmediate = 1 */
#define CPH_NCCL_SCALAR_HOST_IMMEDIATE 1

/* ncclConfig_t as NCCL 2.14 introduced it (ncclConfig_v21400 in nccl.h.in): size, magic, version, blocking. Later
 * NCCLs only append fields; they copy min(size, their own size) bytes of the caller's struct, check the magic,
 * and honour each field only when version is at least the release that added it, so this struct with version
 * 2.14.0 is read correctly by every NCCL from 2.14 on (the fields it lacks take NCCL's defaults). */
typedef struct {
	size_t size;
	unsigned int magic;
	unsigned int version;
	int blocking;
} cph_nccl_config_v21400;

#define CPH_NCCL_CONFIG_MAGIC 0xcafebeefu /* NCCL_API_MAGIC */
#define CPH_NCCL_CONFIG_VERSION 21400     /* NCCL_VERSION(2, 14, 0) */

/* cph_nccl is one loaded NCCL library: its dlopen handle and the entry points looked up in it. The optional
 * ones are NULL when the library lacks them. */
typedef struct cph_nccl {
	void *handle;
	ncclResult_t (*get_version)(int *version);
	ncclResult_t (*get_unique_id)(ncclUniqueId *id);
	ncclResult_t (*comm_init_rank)(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
	ncclResult_t (*comm_init_rank_config)(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
	                                      cph_nccl_config_v21400 *config); /* optional: NCCL 2.14 and later */
	ncclResult_t (*comm_get_async_error)(ncclComm_t comm, ncclResult_t *async_error);
	ncclResult_t (*comm_destroy)(ncclComm_t comm);
	ncclResult_t (*comm_abort)(ncclComm_t comm);
	ncclResult_t (*all_reduce)(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
	                           ncclComm_t comm, cudaStream_t stream);
	const char *(*get_error_string)(ncclResult_t result);
	const char *(*get_last_error)(ncclComm_t comm); /* optional: NCCL 2.13 and later */
	ncclResult_t (*redop_create_premulsum)(ncclRedOp_t *op, void *scalar, ncclDataType_t type,
	                                       ncclScalarResidence_t residence, ncclComm_t comm); /* optional: 2.11+ */
	ncclResult_t (*redop_destroy)(ncclRedOp_t op, ncclComm_t comm);                   /* optional: 2.11+ */
} cph_nccl;

int cph_nccl_open(const char *path, cph_nccl *lib, char *err, size_t err_bytes);
void cph_nccl_close(cph_nccl *lib);
int cph_nccl_is_mapped(const char *path);

ncclResult_t cph_nccl_get_version(const cph_nccl *lib, int *version);
ncclResult_t cph_nccl_get_unique_id(const cph_nccl *lib, ncclUniqueId *id);
ncclResult_t cph_nccl_comm_init_rank(const cph_nccl *lib, ncclComm_t *comm, int nranks, const ncclUniqueId *id,
                                     int rank);
ncclResult_t cph_nccl_comm_init_rank_nonblocking(const cph_nccl *lib, ncclComm_t *comm, int nranks,
                                                const ncclUniqueId *id, int rank);
ncclResult_t cph_nccl_comm_get_async_error(const cph_nccl *lib, ncclComm_t comm, ncclResult_t *async_error);
ncclResult_t cph_nccl_comm_destroy(const cph_nccl *lib, ncclComm_t comm);
ncclResult_t cph_nccl_comm_abort(const cph_nccl *lib, ncclComm_t comm);
ncclResult_t cph_nccl_all_reduce(const cph_nccl *lib, uintptr_t send, uintptr_t recv, size_t count,
                                 ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm, uintptr_t stream);
ncclResult_t cph_nccl_redop_create_premulsum_u64(const cph_nccl *lib, ncclRedOp_t *op, uint64_t scalar,
                                                ncclComm_t comm);
ncclResult_t cph_nccl_redop_destroy(const cph_nccl *lib, ncclRedOp_t op, ncclComm_t comm);
const char *cph_nccl_error_string(const cph_nccl *lib, ncclResult_t result);
const char *cph_nccl_last_error(const cph_nccl *lib, ncclComm_t comm);

#endif
