// Package sizing owns the sizes a run is given in: the table of real models' KV geometry (--model),
// byte sizes with units (--l2-bytes 512GiB), and what a node's memory allows a job (MemAvailable,
// /dev/shm, the cgroup's limit under Slurm's --mem or a container). It reads /proc and /sys, and
// imports errscope (for the flag's error) and nothing else of this module.
package sizing
