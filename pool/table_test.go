package pool

import (
	"testing"
	"unsafe"
)

func TestRecordSizesMatchTableBytes(t *testing.T) {
	if unsafe.Sizeof(object{}) != objectBytes || unsafe.Sizeof(Extent{}) != extentBytes {
		t.Fatalf(
			"object is %d bytes, Extent %d: update objectBytes and extentBytes",
			unsafe.Sizeof(object{}),
			unsafe.Sizeof(Extent{}),
		)
	}
}

// TestObjectTableAgainstMap inserts and removes ids with adversarial patterns (consecutive runs,
// strides of powers of two, huge values) in a small table so that clusters wrap around its end, and
// checks every lookup against a map and that emptying the table leaves every bucket zero, as New
// made it.
func TestObjectTableAgainstMap(t *testing.T) {
	const maxObjects = 40
	table := newObjectTable(maxObjects)
	live := map[ObjectID]uint32{}
	src := &splitmixSource{state: 3}
	patterns := []func(int) ObjectID{
		func(k int) ObjectID { return ObjectID(k) },
		func(k int) ObjectID { return ObjectID(k) << 20 },
		func(k int) ObjectID { return ObjectID(k)*16 + 1<<63 },
		func(k int) ObjectID { return ^ObjectID(k) },
	}
	for step := range 200_000 {
		id := patterns[src.next(len(patterns))](src.next(3 * maxObjects))
		index, found := table.find(id)
		want, ok := live[id]
		if found != ok || (ok && index != want) {
			t.Fatalf(
				"step %d: find(%d) = %d, %v; map says %d, %v",
				step,
				id,
				index,
				found,
				want,
				ok,
			)
		}
		switch {
		case ok && src.next(2) == 0:
			table.remove(index)
			delete(live, id)
		case !ok && !table.full():
			live[id] = table.insert(id)
		}
		if table.liveObjects != len(live) {
			t.Fatalf("step %d: table counts %d live, map %d", step, table.liveObjects, len(live))
		}
	}
	table.reset()
	for i, bucket := range table.buckets {
		if bucket != 0 {
			t.Fatalf("bucket %d is %#x after reset", i, bucket)
		}
	}
}

// TestGeometryTableBytesMatchesNew pins the estimate made before allocating to what New allocates.
func TestGeometryTableBytesMatchesNew(t *testing.T) {
	geometries := append(layoutGeometries(), everyPolicyGeometry()...)
	geometries = append(
		geometries,
		Geometry{
			CPSize:           8,
			Layers:           4,
			PayloadsPerLayer: 2,
			PageTokens:       16,
			TokenBytes:       32,
			Slots:            1<<20 + 3,
			SlabBytesMax:     64 << 20,
		},
		Geometry{
			CPSize:           8,
			Layers:           4,
			PayloadsPerLayer: 2,
			PageTokens:       16,
			TokenBytes:       32,
			Slots:            1 << 16,
			SlabBytesMax:     1 << 20,
			MaxObjects:       1000,
		},
	)
	for _, g := range geometries {
		a, err := New(g)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := g.TableBytes(), a.TableBytes(); got != want {
			t.Errorf("%+v: Geometry.TableBytes %d, New allocated %d", g, got, want)
		}
	}
}
