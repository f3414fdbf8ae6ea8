//go:build mpich

package bench

// #cgo pkg-config: mpich
import "C"
