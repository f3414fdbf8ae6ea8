// Package l3 is the persistent storage tier under the shared L2: KV blocks kept as files on a local
// or shared filesystem, so that a later job (or another job on the same directory) can load a
// prefix back instead of computing it.
//
// It owns the block file format (a checksummed header and the payload of every CP rank, layer and
// payload in one canonical order), the directory layout (one directory per namespace fingerprint,
// fan-out by key), atomic publication (a unique temporary name renamed into place), verified reads
// (a bad block is a *CorruptError, is removed, and is the caller's miss), and the byte budget (LRU
// by last use, seeded from the files' modification times, so a job continues the order the last one
// left).
//
// On Linux block files are read and written on raw descriptors (osfile_linux.go), in as few system
// calls as their size allows: a read is open, fstat, one readv of the header and a payload of up to
// 128 KiB (a larger one: the header alone, which leads the kernel's readahead to read a cold file
// faster, then 1 MiB at a time, each chunk hashed as it arrives, while it is in the CPU's cache),
// futimens of the hit, close; a write is create, one pwritev of the header and a payload of up to 1
// MiB (a larger one a chunk at a time after the header's place, each hashed just before its write,
// the header last), futimens, close, rename.
//
// A directory that refuses writes (a read-only mount, holding a cache another job warmed) opens
// read-only (Store.ReadOnly): its blocks are read and verified as any, and nothing is written,
// removed or evicted.
//
// A block path that is not a regular file (a FIFO, a directory, a socket, a device, or a symbolic
// link to one) is a corrupt block too: it is found without blocking (regular.go) and never read.
//
// It must not import hicache (the controller uses it, not the other way round), nor MPI, NCCL or
// kernels: the step consensus decides what to read and write; this package only stores bytes. Of
// this module it imports errscope for ConfigError, l3block for the blocks' keys and page slots
// (which the core names too, without this package's I/O) and pool for the geometry and Mix64, and
// nothing else (internal/lint checks it, with every other package's rule of the code map).
// DESIGN.md, "The L3 tier", says how the controller uses it.
package l3
