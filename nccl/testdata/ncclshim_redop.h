/* ncclshim_redop.h: ncclshim's custom reduction operators (ncclRedOpCreatePreMulSum, ncclRedOpDestroy), kept
 * apart so that ncclshim.c stays readable; included by ncclshim.c once, after its types and fail(). Not in the
 * legacy build (NCCL 2.7.8 had no custom operators), where custom_index finds none. */

#ifndef NCCLSHIM_LEGACY
#define SHIM_CUSTOM_OPS 8
#define SHIM_FIRST_CUSTOM_OP 5 /* ncclNumOps */
static uint64_t custom_scalar[SHIM_CUSTOM_OPS];
static int custom_used[SHIM_CUSTOM_OPS];

EXPORT ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t type, int residence,
                                             ncclComm_t comm)
{
	if (op == NULL || scalar == NULL || comm == NULL)
		return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: op, scalar or comm is NULL");
	if (type != ncclInt64 && type != ncclUint64)
		return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: data type %d (the shim has int64 and uint64)", (int)type);
	if (residence != 1)
		return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: residence %d (the shim has host-immediate scalars only)", residence);
	for (int i = 0; i < SHIM_CUSTOM_OPS; i++) {
		if (!custom_used[i]) {
			custom_used[i] = 1;
			memcpy(&custom_scalar[i], scalar, sizeof custom_scalar[i]);
			*op = (ncclRedOp_t)(SHIM_FIRST_CUSTOM_OP + i);
			return ncclSuccess;
		}
	}
	return fail(ncclInternalError, "ncclRedOpCreatePreMulSum: more than %d live operators", SHIM_CUSTOM_OPS);
}

static int custom_index(ncclRedOp_t op)
{
	int i = (int)op - SHIM_FIRST_CUSTOM_OP;
	return i >= 0 && i < SHIM_CUSTOM_OPS && custom_used[i] ? i : -1;
}

EXPORT ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
	int i = custom_index(op);
	if (comm == NULL || i < 0)
		return fail(ncclInvalidArgument, "ncclRedOpDestroy: operator %d is not a live custom one", (int)op);
	custom_used[i] = 0;
	return ncclSuccess;
}
#else
static int custom_index(ncclRedOp_t op)
{
	(void)op;
	return -1;
}
#endif

/* premul writes send times the custom operator's scalar into recv (the two may be the same buffer). */
static int premul(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op)
{
	int i = custom_index(op);
	if (i < 0 || (type != ncclInt64 && type != ncclUint64))
		return -1;
#ifndef NCCLSHIM_LEGACY
	const uint64_t *in = send;
	uint64_t *out = recv;
	for (size_t k = 0; k < count; k++)
		out[k] = in[k] * custom_scalar[i];
#else
	(void)send, (void)recv, (void)count;
#endif
	return 0;
}
