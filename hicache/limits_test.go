package hicache

import (
	"errors"
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/pool"
)

// Local checks with no collective: every rank runs them alike.

func TestGeometryErrorsNameTheirFlag(t *testing.T) {
	good := pool.Geometry{CPSize: 2, Layers: 4, PayloadsPerLayer: 2, PageTokens: 16, TokenBytes: 32, Slots: 64, SlabBytesMax: 1 << 20}
	for flag, mutate := range map[string]func(*pool.Geometry){
		"layers":         func(g *pool.Geometry) { g.Layers = 1 << 60 },
		"payloads":       func(g *pool.Geometry) { g.PayloadsPerLayer = 0 },
		"page-tokens":    func(g *pool.Geometry) { g.PageTokens = -1 },
		"token-bytes":    func(g *pool.Geometry) { g.TokenBytes = 1 << 60 },
		"l2-slots":       func(g *pool.Geometry) { g.Slots = 1 << 40 },
		"slab-bytes-max": func(g *pool.Geometry) { g.SlabBytesMax = 100 },
		"cp":             func(g *pool.Geometry) { g.CPSize = 0 },
	} {
		g := good
		mutate(&g)
		var ce *spmd.ConfigError
		if err := geometryConfigError(g.Validate()); !errors.As(err, &ce) || ce.Flag != flag {
			t.Errorf("%s: %v, want a spmd.ConfigError naming --%s", flag, err, flag)
		}
	}
	if err := geometryConfigError(good.Validate()); err != nil {
		t.Fatal(err)
	}
}

func TestTablesThatCannotFitAreRefused(t *testing.T) {
	g := pool.Geometry{CPSize: 8, Layers: 1, PayloadsPerLayer: 1, PageTokens: 1, TokenBytes: 8, Slots: 1 << 20, SlabBytesMax: 1 << 30}
	available := func(bytes int64) func() (int64, error) { return func() (int64, error) { return bytes, nil } }
	need := g.TableBytes() * 8
	if err := checkTablesFit(g, 8, available(need)); err != nil {
		t.Fatalf("tables that just fit: %v", err)
	}
	var ce *spmd.ConfigError
	if err := checkTablesFit(g, 8, available(need-1)); !errors.As(err, &ce) || ce.Flag != "l2-slots" || !strings.Contains(err.Error(), "8 rank(s)") {
		t.Fatalf("tables one byte too large for 8 ranks: %v, want --l2-slots refused", err)
	}
	if err := checkTablesFit(g, 8, func() (int64, error) { return 0, errors.New("no meminfo") }); err != nil {
		t.Fatalf("without /proc/meminfo the check must stand aside: %v", err)
	}
	if free, err := memAvailableBytes(); err != nil || free <= 0 {
		t.Fatalf("MemAvailable: %d, %v", free, err)
	}
}

func TestInjectionOutsideTheWorldIsRefused(t *testing.T) {
	o := &Options{InjectHang: Injection{Rank: 3, Step: 1, Set: true}}
	if err := o.checkInjectionRanks(4); err != nil {
		t.Fatalf("rank 3 of 4: %v", err)
	}
	var ce *spmd.ConfigError
	if err := o.checkInjectionRanks(3); !errors.As(err, &ce) || ce.Flag != "inject-hang" {
		t.Fatalf("rank 3 of 3: %v, want --inject-hang refused", err)
	}
}
