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
	// Replicas is the fewest found, at most Max; 0 when none up to Max did (or with clients).
	Replicas int
	// TTFTP50 is the p50 over every replica's requests at Replicas (at Max when none did), in
	// seconds.
	TTFTP50 float64
	// Max is the most replicas the search tried: every k from 1 to it.
	Max int
}

// ReplicasFor splits records over k replicas as a run splits its workload (replicaOf(i, k): the
// replica of record i; a flush goes to every replica), replays each replica's share on its own
// virtual clock, and finds the fewest k, up to maxReplicas, whose TTFT p50 over all the requests
// is at most targetNs, trying every k from 1 up: the p50 need not fall as k grows (which requests
// share a replica, and so queue together, changes with k), so a search that halved an interval
// could pass over the fewest. It is an estimate at the group's hits (MODELLED): each request keeps
// the hits it had on the one group, while a replica keeps a full-size L1 and L2 of its own and
// sees 1/k of the requests, so a split replica may hit less (a prefix whose requests land on
// different replicas is cached by each) or more (less traffic contends for the same capacity);
// the caches are not replayed split. Closed-loop clients, whose load follows the service, are not
// split: 0. The p50 is read by quantile, as the figures it is printed beside are read.
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
	for k := 1; k <= maxReplicas; k++ {
		out.TTFTP50 = splitP50(records, replicaOf, b, p, l, k, quantile)
		if out.TTFTP50 <= float64(targetNs)/1e9 {
			out.Replicas = k
			return out
		}
	}
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
