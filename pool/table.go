package pool

// object is one live reservation. Records live in a table allocated at start-up; a record index is an
// internal handle that never reaches the digest or a placement, so record reuse order cannot make two
// allocators with equal histories look different.
type object struct {
	id    ObjectID
	seq   uint64 // backup sequence number given to Reserve
	clock uint64 // logical clock of the last Reserve or Touch; LRU key with id
	pages uint32
	// firstSlot is the global slot where the object's first extent starts; extents are chained through
	// Allocator.extentSlots and extentNext. On a free record it links the free list instead (index+1).
	firstSlot uint32
	extents   uint32 // number of extents
	lruIndex  uint32 // index+1 in Allocator.lru; 0 <=> not evictable (uncommitted or referenced)
	refs      uint32
	committed bool
	live      bool
}

// objectBytes and extentBytes are the sizes of object and Extent on 64-bit platforms (pinned by a
// test), so that TableBytes needs no unsafe.
const (
	objectBytes = 48
	extentBytes = 12
)

// objectTable maps ids to records: open addressing with linear probing and backward-shift deletion, so
// no tombstones build up and a table emptied by deletions is all zero again, exactly as New made it.
//
// buckets[i] is 0 when empty, else home<<32 | (record index+1), where home is the first bucket of the
// record id's probe sequence. Keeping the home in the bucket lets a probe skip entries of other homes and
// lets deletion shift entries back without reading their records: probes touch only the bucket array.
// len(buckets) is a power of two >= 2*len(records), so the load factor stays <= 1/2.
type objectTable struct {
	records   []object
	buckets   []uint64
	shift     uint // 64 - log2(len(buckets))
	freeHead  uint32
	highWater uint32 // records [highWater, len) have never been used
	live      int
}

func newObjectTable(maxObjects int) objectTable {
	bucketCount := bucketsFor(maxObjects)
	shift := uint(64)
	for n := bucketCount; n > 1; n /= 2 {
		shift--
	}
	// The large slices are only written where used: fresh zero pages from the OS cost no time here.
	return objectTable{records: make([]object, maxObjects), buckets: make([]uint64, bucketCount), shift: shift}
}

// bucketsFor is the bucket count of a table of maxObjects records: a power of two, at least twice the records.
func bucketsFor(maxObjects int) int {
	bucketCount := 2 * homeRunIDs
	for bucketCount < 2*maxObjects {
		bucketCount *= 2
	}
	return bucketCount
}

// homeRunIDs consecutive ids share one run of homeRunIDs consecutive buckets (two 64-byte cache lines).
// Callers number objects from counters, so objects made and dropped close in time have close ids;
// keeping them together makes a lookup of a fresh id cost one cache miss per homeRunIDs ids instead of
// one per id, which keeps Reserve flat as the table grows to 2^25 buckets. The run is placed by a full
// mix of the high bits, so strided ids still spread. Runs make clusters longer (mean displacement about
// 8 buckets when every id of a run is live), which is cheap because a probe reads only the buckets.
const homeRunIDs = 16

// home is the first bucket of id's probe sequence.
func (t *objectTable) home(id ObjectID) uint32 {
	run := Mix64(uint64(id)/homeRunIDs) >> t.shift
	return uint32(run*homeRunIDs+uint64(id)%homeRunIDs) & uint32(len(t.buckets)-1)
}

// find returns the record index of id and whether it is live.
func (t *objectTable) find(id ObjectID) (uint32, bool) {
	mask := uint32(len(t.buckets) - 1)
	home := t.home(id)
	for i := home; ; i = (i + 1) & mask {
		e := t.buckets[i]
		if e == 0 {
			return 0, false
		}
		if uint32(e>>32) == home && t.records[uint32(e)-1].id == id {
			return uint32(e) - 1, true
		}
	}
}

// full reports whether no record is left.
func (t *objectTable) full() bool { return t.freeHead == 0 && int(t.highWater) == len(t.records) }

// insert takes a record for id, which must be absent, and returns its index.
func (t *objectTable) insert(id ObjectID) uint32 {
	var index uint32
	if t.freeHead != 0 {
		index = t.freeHead - 1
		t.freeHead = t.records[index].firstSlot
	} else {
		index = t.highWater
		t.highWater++
	}
	t.records[index] = object{id: id, live: true}
	mask := uint32(len(t.buckets) - 1)
	home := t.home(id)
	i := home
	for t.buckets[i] != 0 {
		i = (i + 1) & mask
	}
	t.buckets[i] = uint64(home)<<32 | uint64(index+1)
	t.live++
	return index
}

// remove drops the live record `index` from the table and puts it on the free list.
func (t *objectTable) remove(index uint32) {
	mask := uint32(len(t.buckets) - 1)
	hole := t.home(t.records[index].id)
	for uint32(t.buckets[hole]) != index+1 {
		hole = (hole + 1) & mask
	}
	// Backward shift: move later entries of the cluster into the hole unless their home lies cyclically
	// in (hole, j], where moving them would put them before their home.
	for j := (hole + 1) & mask; t.buckets[j] != 0; j = (j + 1) & mask {
		if home := uint32(t.buckets[j] >> 32); (j-home)&mask >= (j-hole)&mask {
			t.buckets[hole] = t.buckets[j]
			hole = j
		}
	}
	t.buckets[hole] = 0
	t.records[index] = object{firstSlot: t.freeHead}
	t.freeHead = index + 1
	t.live--
}

// reset empties the table by removing every live record, O(records used), and then forgets the free
// list so that record indices are handed out as by a fresh table.
func (t *objectTable) reset() {
	for index := range t.highWater {
		if t.records[index].live {
			t.remove(index)
		}
	}
	clear(t.records[:t.highWater])
	t.freeHead, t.highWater = 0, 0
}
