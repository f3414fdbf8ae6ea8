package serving

import "slices"

// Load is a replay's offered load beside what its group serves, both in prompt tokens a second of
// trace time (MODELLED: the group's is the prefill model's at the replay's hits).
type Load struct {
	// DemandTokensPerSecond is the prompt tokens over the span of their arrivals (0 with one
	// arrival, or with closed-loop clients, whose load follows the service).
	DemandTokensPerSecond float64
	// CapacityTokensPerSecond is the prompt tokens over the replay's busy time (Replay.BusyNs).
	CapacityTokensPerSecond float64
	// QueueShare is the mean queue wait (arrival to the first pass of its step) over the mean
	// TTFT: the share of the TTFT that is the queue.
	QueueShare float64
}

// LoadOf is records' load as replay r served them.
func LoadOf(records []Record, r Replay, clients Clients) Load {
	var prompt, queueNs, ttftNs int64
	first, last, requests := int64(-1), int64(0), 0
	for i, t := range r.Requests {
		if records[i].Flush {
			continue
		}
		requests++
		prompt += records[i].Hit.PromptTokens
		queueNs += t.FirstStartNs - t.ArrivalNs
		ttftNs += t.TTFTNs()
		if first < 0 || t.ArrivalNs < first {
			first = t.ArrivalNs
		}
		last = max(last, t.ArrivalNs)
	}
	var l Load
	if span := last - first; span > 0 && clients.N <= 0 && requests > 1 {
		l.DemandTokensPerSecond = float64(prompt) / (float64(span) / 1e9)
	}
	if r.BusyNs > 0 {
		l.CapacityTokensPerSecond = float64(prompt) / (float64(r.BusyNs) / 1e9)
	}
	if ttftNs > 0 {
		l.QueueShare = float64(queueNs) / float64(ttftNs)
	}
	return l
}

// Replicas is how many DP replicas (CP groups, each its own copy of the cache) bring a replay's
// TTFT p50 under a target, found by replaying the virtual clock with the arrivals split over them.
type Replicas struct {
	// Replicas is the fewest found, at most Max; 0 when even Max did not (or with clients).
	Replicas int
	// TTFTP50 is the p50 over every replica's requests at Replicas (at Max when none did), in
	// seconds.
	TTFTP50 float64
	Max     int
}

// ReplicasFor splits records over k replicas as a run splits its workload (replicaOf(i, k): the
// replica of record i; a flush goes to every replica), replays each replica's share on its own
// virtual clock with the same hits, and finds the fewest k, up to maxReplicas, whose TTFT p50 over
// all the requests is at most targetNs: by doubling k, then halving the last interval (the p50
// falls as k grows, up to a step's own time). Each request keeps the hits it had on one replica;
// on k replicas a prefix whose requests land on different ones is cached by each, and hits less,
// so k is a lower bound. Closed-loop clients, whose load follows the service, are not split: 0.
// The p50 is read by quantile, as the figures it is printed beside are read.
func ReplicasFor(
	records []Record,
	replicaOf func(i, k int) int,
	b Batching,
	p Prefill,
	l Links,
	clients Clients,
	targetNs int64,
	maxReplicas int,
	quantile Quantile,
) Replicas {
	out := Replicas{Max: maxReplicas}
	if clients.N > 0 || len(records) == 0 || maxReplicas < 1 {
		return out
	}
	p50 := func(k int) float64 { return splitP50(records, replicaOf, b, p, l, k, quantile) }
	lo, hi := 0, 1 // p50(lo) above the target (lo 0: none tried), p50(hi) to be tried
	at := p50(hi)
	for at > float64(targetNs)/1e9 {
		if hi >= maxReplicas {
			out.TTFTP50 = at
			return out
		}
		lo, hi = hi, min(2*hi, maxReplicas)
		at = p50(hi)
	}
	for hi-lo > 1 { // p50(hi) meets the target, p50(lo) does not
		mid := (lo + hi) / 2
		if v := p50(mid); v <= float64(targetNs)/1e9 {
			hi, at = mid, v
		} else {
			lo = mid
		}
	}
	out.Replicas, out.TTFTP50 = hi, at
	return out
}

// splitP50 is the TTFT p50, in seconds, of records split over k replicas, each replayed alone.
func splitP50(
	records []Record,
	replicaOf func(i, k int) int,
	b Batching,
	p Prefill,
	l Links,
	k int,
	quantile Quantile,
) float64 {
	shares := make([][]Record, k)
	for i, r := range records {
		if r.Flush {
			for j := range shares {
				shares[j] = append(shares[j], r)
			}
			continue
		}
		j := replicaOf(i, k)
		shares[j] = append(shares[j], r)
	}
	var ttft []int64
	for _, share := range shares {
		r := VirtualReplay(share, b, p, l, Clients{})
		for i, t := range r.Requests {
			if !share[i].Flush {
				ttft = append(ttft, t.TTFTNs())
			}
		}
	}
	if len(ttft) == 0 {
		return 0
	}
	slices.Sort(ttft)
	return quantile(ttft, 0.50)
}
