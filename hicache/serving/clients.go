package serving

import "slices"

// Clients are a closed loop of N clients (--clients): each sends its next request, in the
// workload's order, when its last one got its first token and ThinkNs more has passed; the first N
// requests arrive at 0. Arrivals then follow the service: a slower cache sends fewer requests a
// second, as real users wait for their answers.
type Clients struct {
	N       int
	ThinkNs int64
}

// ClosedLoop is the clients' state over one replica's events: which have been sent and when. Its
// caller tells it each first token once the caller knows it, which on both clocks is when the step
// that delivered it has ended: CP rank 0 forms step k+1 as step k begins (FormNextAtStart), so step
// k's first tokens send requests into step k+2 at the earliest. A flush in the workload is sent
// with the request before it and holds no client.
type ClosedLoop struct {
	thinkNs  int64
	flush    []bool  // by event
	arrivals []int64 // of the events sent, a prefix of the workload
}

// NewClosedLoop starts the clients over events whose flushes are flush: the first N requests arrive
// at 0.
func NewClosedLoop(c Clients, flush []bool) *ClosedLoop {
	l := &ClosedLoop{thinkNs: c.ThinkNs, flush: flush}
	for range c.N {
		l.send(0)
	}
	l.sendFlushes(0)
	return l
}

// Sent is how many events have been sent: the first Sent of the workload.
func (l *ClosedLoop) Sent() int { return len(l.arrivals) }

// ArrivalNs is when sent event i arrives.
func (l *ClosedLoop) ArrivalNs(i int) int64 { return l.arrivals[i] }

// FirstTokens frees the clients whose requests got their first tokens at endsNs: each sends the
// next request ThinkNs later, the earliest first token first.
func (l *ClosedLoop) FirstTokens(endsNs []int64) {
	sorted := slices.Clone(endsNs)
	slices.Sort(sorted)
	for _, end := range sorted {
		l.send(end + l.thinkNs)
	}
}

// send sends the next request at atNs, with the flushes before it.
func (l *ClosedLoop) send(atNs int64) {
	l.sendFlushes(atNs)
	if len(l.arrivals) < len(l.flush) {
		l.arrivals = append(l.arrivals, atNs)
	}
	l.sendFlushes(atNs)
}

// sendFlushes sends the flushes next in the workload: they wait for no client.
func (l *ClosedLoop) sendFlushes(atNs int64) {
	for len(l.arrivals) < len(l.flush) && l.flush[len(l.arrivals)] {
		l.arrivals = append(l.arrivals, atNs)
	}
}
