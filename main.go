// Command cphicache implements and validates a CP-shared physical L2 KV-cache pool for
// context-parallel LLM serving. It is an SPMD program: launch it with mpirun (under Slurm on a
// cluster), one process per rank.
//
// This file is the whole of the main package: the command-line interface is package cli (cli/doc.go
// holds its file map), and main only hands it the build's version and the command line.
package main

import "github.com/cphicache/cphicache/cli"

// version is set at link time by the Makefile (-X main.version=...).
var version = "dev"

func main() { cli.Main(version) }
