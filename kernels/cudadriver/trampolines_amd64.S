//go:build cuda

// trampolines_amd64.S: each driver entry point of symbols.h, a jump through its pointer in load.c. A jump
// forwards every argument register and the stack as the caller left them, so one line fits every signature.
#define CPH_CU(name) .globl name; .type name, @function; name: jmp *cph_cu_fn_##name(%rip);

	.text
#include "symbols.h"

	.section .note.GNU-stack,"",@progbits
