package config

import (
	"reflect"
	"testing"
)

// TestOptionsHoldNoTestHook: every field of the options is exported, a setting a command (or a
// caller of the runner) gives and the provenance can state; a test's levers are the runner's
// Testing, passed in beside them. An unexported field here would be a hook that no command sets and
// no rank compares.
func TestOptionsHoldNoTestHook(t *testing.T) {
	for _, v := range []any{Options{}, L3Options{}, ServingOptions{}, Injection{}} {
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			if f := typ.Field(i); !f.IsExported() {
				t.Errorf(
					"%s.%s is unexported: a test's lever belongs in runner.Testing, validate's in runner.Pass",
					typ.Name(),
					f.Name,
				)
			}
		}
	}
}
