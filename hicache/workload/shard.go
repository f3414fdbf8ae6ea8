package workload

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// ShardRuleHelp states how ShardForReplica splits a workload; the CLI prints it in --help.
const ShardRuleHelp = "Each DP replica (CP group) serves the requests whose rid maps to it: the part of the rid " +
	"before the first '.' (the conversation, \"c17\" of \"c17.t3\"; the whole rid when it has no '.') is hashed " +
	"with 64-bit FNV-1a, and replica = hash mod dp, so every turn of a conversation lands on the same replica. " +
	"A Mooncake trace has no conversations: a request's rid is its line number, so its requests spread over the " +
	"replicas one by one, and a prefix two replicas both use is cached by each. Flush events go to every replica."

// ReplicaForRID returns the DP replica, in [0, dp), that serves rid; see ShardRuleHelp. dp must be
// positive.
func ReplicaForRID(rid string, dp int) int {
	if dp <= 0 {
		panic(fmt.Sprintf("ReplicaForRID: dp = %d, want > 0", dp))
	}
	conversation := rid
	if dot := strings.IndexByte(rid, '.'); dot >= 0 {
		conversation = rid[:dot]
	}
	h := fnv.New64a()
	h.Write([]byte(conversation)) // a hash.Hash never returns a write error
	return int(h.Sum64() % uint64(dp))
}

// ShardForReplica returns, in order, the events replica (of dp) replays: its requests
// (ReplicaForRID) and every flush. It panics unless 0 <= replica < dp: the topology has checked
// both long before.
func ShardForReplica(events []Event, dp, replica int) []Event {
	if replica < 0 || replica >= dp {
		panic(fmt.Sprintf("ShardForReplica: replica %d outside [0, %d)", replica, dp))
	}
	shard := make([]Event, 0, len(events)/dp+1)
	for _, e := range events {
		if e.Flush || ReplicaForRID(e.Request.RID, dp) == replica {
			shard = append(shard, e)
		}
	}
	return shard
}
