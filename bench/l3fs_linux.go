package bench

import (
	"fmt"
	"syscall"
)

// l3Filesystems names the statfs magic numbers of the filesystems an L3 directory is likely to be
// on (linux/magic.h and the vendors' headers).
var l3Filesystems = map[int64]string{
	0xEF53: "ext2/3/4", 0x58465342: "xfs", 0x9123683E: "btrfs", 0x2FC12FC1: "zfs", 0x01021994: "tmpfs",
	0x6969: "nfs", 0x0BD00BD0: "lustre", 0x47504653: "gpfs", 0x19830326: "beegfs", 0x794C7630: "overlayfs",
	0xFF534D42: "cifs", 0x65735546: "fuse",
}

// FilesystemType names the filesystem dir is on, for the header: a tmpfs or a local disk reads as
// memory speed, a shared filesystem does not, and the ratios mean different things on each.
func FilesystemType(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return "unknown (" + err.Error() + ")"
	}
	if name, ok := l3Filesystems[int64(st.Type)]; ok {
		return name
	}
	return fmt.Sprintf("statfs type %#x", st.Type)
}
