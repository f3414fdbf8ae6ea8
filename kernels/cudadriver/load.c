//go:build cuda

// load.c: the CUDA driver, libcuda.so.1, loaded on the first cuInit rather than by the dynamic loader at start,
// so that the cuda build starts where there is no driver (a login node) and can say what is missing.
//
// Every driver entry point the binary calls (symbols.h) is defined here as a jump through a pointer
// (trampolines_amd64.S), and the executable's definition wins over libcuda's, so no caller (gorgonia.org/cu
// included) links to libcuda directly and the link drops it (--as-needed). The pointers start at a stub that
// returns CUDA_ERROR_NOT_INITIALIZED; cuInit fills them from the library. gorgonia.org/cu calls cuInit in its
// package initialiser and exits the process when it fails: the first call's failure is kept for
// cph_cuda_missing (Go's Missing) and reported as success to that one caller, so the process lives on, and
// every later driver call fails with the driver's own error (or NOT_INITIALIZED when there is no driver).
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "load.h"

enum {
	cph_cuda_success = 0,
	cph_cuda_error_not_initialized = 3,
	cph_cuda_error_not_found = 500,
};

static int cph_cu_unloaded(void) { return cph_cuda_error_not_initialized; }
// An entry point this driver does not have (an old one, or one a newer driver dropped) fails when called,
// never at load.
static int cph_cu_absent(void) { return cph_cuda_error_not_found; }

#define CPH_CU(name) void *cph_cu_fn_##name = (void *)cph_cu_unloaded;
#include "symbols.h"
#undef CPH_CU

static const char *const cph_cu_names[] = {
#define CPH_CU(name) #name,
#include "symbols.h"
#undef CPH_CU
};

static void **const cph_cu_slots[] = {
#define CPH_CU(name) &cph_cu_fn_##name,
#include "symbols.h"
#undef CPH_CU
};

static char cph_cuda_missing_text[512];
static int cph_cuda_init_calls;
static int cph_cuda_loaded;
static int (*cph_cuda_real_init)(unsigned int);

// cph_cuda_load opens the driver and fills every pointer; on failure it says why in cph_cuda_missing_text.
static int (*cph_cuda_load(void))(unsigned int) {
	const char *path = getenv("CPHICACHE_CUDA_LIB");
	if (path == NULL || path[0] == '\0') path = "libcuda.so.1";
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL) {
		const char *why = dlerror();
		snprintf(cph_cuda_missing_text, sizeof cph_cuda_missing_text, "no CUDA driver: %s", why ? why : path);
		return NULL;
	}
	int (*init)(unsigned int) = (int (*)(unsigned int))dlsym(lib, "cuInit");
	if (init == NULL) {
		snprintf(cph_cuda_missing_text, sizeof cph_cuda_missing_text, "no CUDA driver: %s has no cuInit", path);
		return NULL;
	}
	for (size_t i = 0; i < sizeof cph_cu_names / sizeof cph_cu_names[0]; i++) {
		void *fn = dlsym(lib, cph_cu_names[i]);
		*cph_cu_slots[i] = fn != NULL ? fn : (void *)cph_cu_absent;
	}
	return init;
}

int cuInit(unsigned int flags) {
	int first = cph_cuda_init_calls++ == 0;
	if (!cph_cuda_loaded) {
		cph_cuda_real_init = cph_cuda_load();
		cph_cuda_loaded = 1;
	}
	int (*init)(unsigned int) = cph_cuda_real_init;
	if (init == NULL) return first ? cph_cuda_success : cph_cuda_error_not_initialized;
	int rc = init(flags);
	if (rc != cph_cuda_success && first) {
		const char *name = NULL;
		void *get_name = cph_cu_fn_cuGetErrorName;
		if (get_name != (void *)cph_cu_absent) ((int (*)(int, const char **))get_name)(rc, &name);
		snprintf(cph_cuda_missing_text, sizeof cph_cuda_missing_text, "cuInit failed: %s (%d)",
			name != NULL ? name : "unknown error", rc);
		return cph_cuda_success;
	}
	return rc;
}

const char *cph_cuda_missing(void) { return cph_cuda_missing_text[0] != '\0' ? cph_cuda_missing_text : NULL; }
