package workload

import (
	"hash/fnv"
	"testing"
)

// The DP sharding: a replica takes whole conversations, in event order.

func TestShardForReplicaKeepsConversationsTogetherAndCoversEveryRequestOnce(t *testing.T) {
	cfg := smallSyntheticConfig()
	cfg.FlushEvery = 25
	events := mustGenerate(t, cfg)
	flushes := len(events) - len(requestsOf(events))
	for _, dp := range []int{1, 2, 3, 8} {
		servedBy := map[string]int{}    // rid -> replica
		conversationOn := map[int]int{} // conversation -> replica
		for replica := range dp {
			shard := ShardForReplica(events, dp, replica)
			if got := len(shard) - len(requestsOf(shard)); got != flushes {
				t.Fatalf("dp %d replica %d: %d flushes, want all %d", dp, replica, got, flushes)
			}
			for _, r := range requestsOf(shard) {
				if other, dup := servedBy[r.RID]; dup {
					t.Fatalf("dp %d: %s on replicas %d and %d", dp, r.RID, other, replica)
				}
				servedBy[r.RID] = replica
				conv, _ := parseRIDForTest(t, r.RID)
				if other, ok := conversationOn[conv]; ok && other != replica {
					t.Fatalf(
						"dp %d: conversation %d split over replicas %d and %d",
						dp,
						conv,
						other,
						replica,
					)
				}
				conversationOn[conv] = replica
			}
		}
		if len(servedBy) != len(requestsOf(events)) {
			t.Fatalf(
				"dp %d: %d requests served, want %d",
				dp,
				len(servedBy),
				len(requestsOf(events)),
			)
		}
	}
}

func TestShardForReplicaKeepsEventOrder(t *testing.T) {
	cfg := smallSyntheticConfig()
	cfg.FlushEvery = 9
	events := mustGenerate(t, cfg)
	shard := ShardForReplica(events, 3, 1)
	next := 0
	for _, e := range shard {
		for next < len(events) && !eventsEqual(events[next:next+1], []Event{e}) {
			next++
		}
		if next == len(events) {
			t.Fatal("a shard is not a subsequence of the workload")
		}
		next++
	}
}

func TestReplicaForRIDUsesThePartBeforeTheFirstDot(t *testing.T) {
	for dp := 1; dp <= 16; dp++ {
		for _, conv := range []string{"17", "c3", "", "user-9"} {
			whole := ReplicaForRID(conv, dp)
			if got := ReplicaForRID(conv+".t4.x", dp); got != whole {
				t.Fatalf("dp %d: %q.t4.x on replica %d, %q on %d", dp, conv, got, conv, whole)
			}
		}
	}
	// FNV-1a of "c17" is pinned so the rule printed in --help stays the rule the code applies.
	h := fnv.New64a()
	h.Write([]byte("c17"))
	if got, want := ReplicaForRID("c17.t3", 7), int(h.Sum64()%7); got != want {
		t.Fatalf("ReplicaForRID(c17.t3, 7) = %d, want %d", got, want)
	}
}

func TestShardForReplicaPanicsOnAReplicaOutsideDP(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("replica 2 of dp 2 did not panic")
		}
	}()
	ShardForReplica(nil, 2, 2)
}
