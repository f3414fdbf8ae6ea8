package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeL3CommandsWorkOnAFreshMachine: --l3-dir must exist (a typo is refused, not created), so every README
// command that names a literal --l3-dir makes it first, in the same block.
func TestReadmeL3CommandsWorkOnAFreshMachine(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	l3Dir := regexp.MustCompile(`--l3-dir[= ](/[^ ]+)`)
	for _, block := range strings.Split(string(readme), "```")[1:] {
		made := map[string]bool{}
		for _, line := range strings.Split(block, "\n") {
			for _, f := range regexp.MustCompile(`mkdir -p ([^ ;&]+)`).FindAllStringSubmatch(line, -1) {
				made[f[1]] = true
			}
			for _, m := range l3Dir.FindAllStringSubmatch(line, -1) {
				if !made[m[1]] {
					t.Errorf("the README runs --l3-dir %s without making it first:\n%s", m[1], line)
				}
			}
		}
	}
}
