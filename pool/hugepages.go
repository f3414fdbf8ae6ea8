package pool

// hugePageMinBytes is the size from which a table is worth huge pages (adviseHugePages, Linux
// only): below it the TLB covers it anyway.
const hugePageMinBytes = 8 << 20
