//go:build !linux

package pool

// adviseHugePages is Linux's transparent huge pages hint; elsewhere the tables keep the default
// pages.
func adviseHugePages[T any](s []T) {}
