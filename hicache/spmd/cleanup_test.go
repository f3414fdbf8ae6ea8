package spmd

import (
	"errors"
	"testing"
	"time"
)

// TestCleanupAfterRunLeavesNothing: once Run has begun the process is ending, so an action added
// after it runs at once and Create makes nothing; a Run that begins while Create makes its thing
// waits for it and undoes it. (A signal's Run just before a segment was made, or between its making
// and the Add of its removal, left the segment behind.)
func TestCleanupAfterRunLeavesNothing(t *testing.T) {
	var c Cleanup
	c.Run()
	ran := false
	c.Add(func() { ran = true })
	if !ran {
		t.Error("an action added after Run did not run at once")
	}
	created := false
	if _, err := c.Create(func() (func(), error) { created = true; return func() {}, nil }); !errors.Is(
		err,
		ErrEnding,
	) ||
		created {
		t.Errorf("Create after Run: %v, made it: %v; want ErrEnding and nothing made", err, created)
	}

	var d Cleanup
	inside, runDone := make(chan struct{}), make(chan struct{})
	undone := false
	go func() {
		<-inside
		d.Run() // a signal arriving while the thing is being made
		close(runDone)
	}()
	remove, err := d.Create(func() (func(), error) {
		close(inside)
		select { // Run has begun by now, or soon: it must wait for what is being made
		case <-runDone:
			t.Error("Run ended while Create was making its thing")
		case <-time.After(100 * time.Millisecond):
		}
		return func() { undone = true }, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-runDone:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end after Create did")
	}
	if !undone {
		t.Error("a Run that began during Create did not undo what it made")
	}
	remove() // harmless after Run
}

// TestASecondRunWaitsForTheFirst: a signal while the watchdog's clean-up runs must not end the
// process with the clean-up half done: its Run returns only once the first has.
func TestASecondRunWaitsForTheFirst(t *testing.T) {
	var c Cleanup
	inAction, release, secondDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	c.Add(func() {
		close(inAction)
		<-release
	})
	go c.Run()
	<-inAction
	go func() {
		c.Run()
		close(secondDone)
	}()
	select {
	case <-secondDone:
		t.Fatal("the second Run returned while the first was still running its actions")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case <-secondDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the second Run did not return after the first finished")
	}
}
