package errscope

import "strconv"

// NotCoveredError ends a run under --strict whose result is "OK, but ...": nothing wrong was found,
// but What was not checked or went wrong without changing any data. Every rank holds the same
// aggregated report.
type NotCoveredError struct{ What string }

func (e *NotCoveredError) Error() string {
	return "OK, but " + e.What + " (--strict: exit status 5 for a result that did not check everything)"
}
func (e *NotCoveredError) Scope() Scope { return JobScope }

// The counts that errors and summaries say, in English: here so that every layer that words a
// message (spmd, the report, the commands) says them alike without linking MPI.

// Plural is "1 rank", "8 ranks": a count with its noun, for the summaries' first lines.
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// Count is n and its noun, singular for 1 and plural otherwise, for counts of any integer type
// whose plural is not the noun and an s: Count(1, "flush", "flushes"), Count(3, "flush",
// "flushes").
func Count[N ~int | ~int64](n N, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.FormatInt(int64(n), 10) + " " + many
}
