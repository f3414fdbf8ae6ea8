package pool

import (
	"fmt"
	"strings"
)

// object is one live reservation. Records live in a table allocated at start-up; a record index is
// an internal handle that never reaches the digest or a placement, so record reuse order cannot
// make two allocators with equal histories look different.
type object struct {
	id    ObjectID
	seq   uint64 // backup sequence number given to Reserve
	clock uint64 // logical clock of the last Reserve or Touch; LRU key with id
	pages uint32
	// firstSlot is the global slot where the object's first extent starts; extents are chained
	// through Allocator.extentSlots and extentNext. On a free record it links the free list instead
	// (index+1).
	firstSlot   uint32
	extentCount uint32
	lruIndex    uint32 // index+1 in Allocator.lru; 0 <=> not evictable (uncommitted or referenced)
	refs        uint32
	committed   bool
	live        bool
	segment     uint8 // SLRU's segment (segProbation or segProtected); segProbation otherwise
}

// objectBytes and extentBytes are the sizes of object and Extent on 64-bit platforms (pinned by a
// test), so that TableBytes needs no unsafe.
const (
	objectBytes = 48
	extentBytes = 12
)

// objectTable maps ids to records: open addressing with linear probing and backward-shift deletion,
// so no tombstones build up and a table emptied by deletions is all zero again, exactly as New made
// it.
//
// buckets[i] is 0 when empty, else home<<32 | (record index+1), where home is the first bucket of
// the record id's probe sequence. Keeping the home in the bucket lets a probe skip entries of other
// homes and lets deletion shift entries back without reading their records: probes touch only the
// bucket array. len(buckets) is a power of two >= 2*len(records), so the load factor stays <= 1/2.
type objectTable struct {
	records   []object
	buckets   []uint64
	shift     uint // 64 - log2(len(buckets))
	freeHead  uint32
	highWater uint32 // records [highWater, len) have never been used
	// liveObjects counts the live records.
	liveObjects int
}

func newObjectTable(maxObjects int) objectTable {
	bucketCount := bucketsFor(maxObjects)
	shift := uint(64)
	for n := bucketCount; n > 1; n /= 2 {
		shift--
	}
	// The large slices are only written where used: fresh zero pages from the OS cost no time here.
	return objectTable{
		records: make([]object, maxObjects),
		buckets: make([]uint64, bucketCount),
		shift:   shift,
	}
}

// bucketsFor is the bucket count of a table of maxObjects records: a power of two, at least twice
// the records.
func bucketsFor(maxObjects int) int {
	bucketCount := 2 * homeRunIDs
	for bucketCount < 2*maxObjects {
		bucketCount *= 2
	}
	return bucketCount
}

// homeRunIDs consecutive ids share one run of homeRunIDs consecutive buckets (two 64-byte cache
// lines). Callers number objects from counters, so objects made and dropped close in time have
// close ids; keeping them together makes a lookup of a fresh id cost one cache miss per homeRunIDs
// ids instead of one per id, which keeps Reserve flat as the table grows to 2^25 buckets. The run
// is placed by a full mix of the high bits, so strided ids still spread. Runs make clusters longer
// (mean displacement about 8 buckets when every id of a run is live), which is cheap because a
// probe reads only the buckets.
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

// insert takes a record for id, which must be absent, and returns its index. It asserts that the
// record it takes is free, that no entry of id's home on the probe path names id (the entries it
// passes anyway; only those of the same home cost a record read) and that the live count stays
// within the records.
func (t *objectTable) insert(id ObjectID) uint32 {
	var index uint32
	if t.freeHead != 0 {
		index = t.freeHead - 1
		t.freeHead = t.records[index].firstSlot
	} else {
		index = t.highWater
		t.highWater++
	}
	if int(index) >= len(t.records) || t.records[index].live {
		panic(t.broken(0, "insert of object %d: record %d is not a free record", id, index))
	}
	t.records[index] = object{id: id, live: true}
	mask := uint32(len(t.buckets) - 1)
	home := t.home(id)
	i := home
	// Bounded: the load stays <= 1/2, so an empty bucket lies ahead; coming back to home means
	// there is none.
	for e := t.buckets[i]; e != 0; e = t.buckets[i] {
		if uint32(e>>32) == home && t.records[uint32(e)-1].id == id {
			panic(
				t.broken(
					int(i),
					"insert: object %d is already in the table at bucket %d (record %d)",
					id,
					i,
					uint32(e)-1,
				),
			)
		}
		if i = (i + 1) & mask; i == home {
			panic(t.broken(int(i), "insert of object %d: no empty bucket", id))
		}
	}
	t.buckets[i] = uint64(home)<<32 | uint64(index+1)
	t.liveObjects++
	if t.liveObjects > len(t.records) {
		panic(
			t.broken(
				int(i),
				"insert of object %d: %d live objects in %d records",
				id,
				t.liveObjects,
				len(t.records),
			),
		)
	}
	return index
}

// remove drops the live record `index` from the table and puts it on the free list. It asserts that
// the record is live, that its bucket lies on the probe chain from its id's home (no empty bucket
// before it) and records that home, and that the live count stays non-negative.
func (t *objectTable) remove(index uint32) {
	id := t.records[index].id
	if !t.records[index].live {
		panic(t.broken(0, "remove: record %d (object %d) is not live", index, id))
	}
	mask := uint32(len(t.buckets) - 1)
	home := t.home(id)
	hole := home
	// Bounded: the scan stops at an empty bucket, and with the load <= 1/2 there is one.
	for uint32(t.buckets[hole]) != index+1 {
		if t.buckets[hole] == 0 {
			panic(
				t.broken(
					int(hole),
					"remove: object %d (record %d) is not on the probe chain from its home bucket %d",
					id,
					index,
					home,
				),
			)
		}
		hole = (hole + 1) & mask
	}
	if uint32(t.buckets[hole]>>32) != home {
		panic(
			t.broken(
				int(hole),
				"remove: bucket %d of object %d records home %d, the id's home is %d",
				hole,
				id,
				t.buckets[hole]>>32,
				home,
			),
		)
	}
	// Backward shift: move later entries of the cluster into the hole unless their home lies
	// cyclically in (hole, j], where moving them would put them before their home.
	for j := (hole + 1) & mask; t.buckets[j] != 0; j = (j + 1) & mask {
		if home := uint32(t.buckets[j] >> 32); (j-home)&mask >= (j-hole)&mask {
			t.buckets[hole] = t.buckets[j]
			hole = j
		}
	}
	t.buckets[hole] = 0
	t.records[index] = object{firstSlot: t.freeHead}
	t.freeHead = index + 1
	t.liveObjects--
	if t.liveObjects < 0 {
		panic(
			t.broken(
				int(hole),
				"remove of object %d: live object count went negative (%d)",
				id,
				t.liveObjects,
			),
		)
	}
}

// broken is brokenInvariant with the table's counters and the buckets around bucket `bucket`.
func (t *objectTable) broken(bucket int, format string, args ...any) string {
	return brokenInvariant(t.dump(bucket), format, args...)
}

// dump describes the table's counters and the buckets around `bucket`, each with its home and its
// record's id.
func (t *objectTable) dump(bucket int) string {
	var out strings.Builder
	fmt.Fprintf(
		&out,
		"object table: records=%d live_objects=%d high_water=%d free_head=%d buckets=%d\n",
		len(t.records),
		t.liveObjects,
		t.highWater,
		t.freeHead,
		len(t.buckets),
	)
	for n := -4; n <= 4; n++ {
		i := (bucket + n) & (len(t.buckets) - 1)
		e := t.buckets[i]
		if e == 0 {
			fmt.Fprintf(&out, "bucket %d: empty\n", i)
			continue
		}
		r := &t.records[min(uint32(e)-1, uint32(len(t.records)-1))]
		fmt.Fprintf(
			&out,
			"bucket %d: home %d record %d (object %d, live %v)\n",
			i,
			e>>32,
			uint32(e)-1,
			r.id,
			r.live,
		)
	}
	return out.String()
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
