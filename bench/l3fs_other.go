//go:build !linux

package bench

// FilesystemType is only known on Linux.
func FilesystemType(string) string { return "unknown" }
