package nccl

import (
	"errors"
	"strings"
	"testing"
)

func TestLoadMissingLibraryNamesItAndSaysWhy(t *testing.T) {
	const path = "/nonexistent/cphicache/libnccl.so.2"
	_, err := Load(path)
	if err == nil {
		t.Fatalf("Load(%q) succeeded", path)
	}
	// dlerror() says "cannot open shared object file: No such file or directory".
	for _, want := range []string{path, "cannot open shared object file"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestLoadDefaultPathNamesTheSoname(t *testing.T) {
	lib, err := Load("")
	if err == nil {
		// A machine with NCCL installed: then it must be a usable one.
		defer lib.Close()
		if lib.Path() != DefaultPath || lib.Version() < MinVersion {
			t.Errorf("Load(\"\") = %s version %d", lib.Path(), lib.Version())
		}
		return
	}
	if !strings.Contains(err.Error(), "libnccl.so.2") {
		t.Errorf("error %q does not name libnccl.so.2", err)
	}
}

func TestLoadLibraryWithoutNCCLNamesTheMissingEntryPoint(t *testing.T) {
	// libm loads fine but has none of NCCL's symbols.
	_, err := Load("libm.so.6")
	if err == nil {
		t.Fatal("Load(libm.so.6) succeeded")
	}
	for _, want := range []string{"libm.so.6", "ncclGetVersion"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestLoadReadsTheShimVersion(t *testing.T) {
	if shim.Version() != 22105 || VersionString(shim.Version()) != "2.21.5" {
		t.Errorf(
			"shim version %d (%s), want 22105 (2.21.5)",
			shim.Version(),
			VersionString(shim.Version()),
		)
	}
	if !shim.HasLastError() {
		t.Error("the current shim has ncclGetLastError but HasLastError is false")
	}
}

func TestLoadRefusesTooOldVersion(t *testing.T) {
	// 2.6.4 in the pre-2.9 encoding: ncclshim reports what NCCLSHIM_VERSION_CODE says.
	t.Setenv("NCCLSHIM_VERSION_CODE", "2604")
	lib, err := Load(shimPath)
	if err == nil {
		lib.Close()
		t.Fatal("Load accepted NCCL 2.6.4")
	}
	for _, want := range []string{"too old", "2.6.4", shimPath} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestLoadAcceptsLegacyLibraryWithoutGetLastError(t *testing.T) {
	lib, err := Load(legacyPath)
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	if lib.Version() != 2708 || VersionString(lib.Version()) != "2.7.8" {
		t.Errorf(
			"legacy version %d (%s), want 2708 (2.7.8)",
			lib.Version(),
			VersionString(lib.Version()),
		)
	}
	if lib.HasLastError() {
		t.Error("the legacy shim has no ncclGetLastError but HasLastError is true")
	}
	// Errors still carry NCCL's string, just no detail.
	_, err = lib.InitRank(UniqueID{}, 1, 1)
	e := asError(t, err)
	if e.Code != InvalidArgument || e.Message != "ncclshim: invalid argument" || e.Detail != "" {
		t.Errorf("legacy error = %+v", e)
	}
}

func TestVersionStringReadsBothEncodings(t *testing.T) {
	for code, want := range map[int]string{2708: "2.7.8", 2804: "2.8.4", 20906: "2.9.6", 22105: "2.21.5", 22703: "2.27.3"} {
		if got := VersionString(code); got != want {
			t.Errorf("VersionString(%d) = %s, want %s", code, got, want)
		}
	}
}

func TestUniqueIDsDiffer(t *testing.T) {
	a, err := shim.UniqueID()
	if err != nil {
		t.Fatal(err)
	}
	b, err := shim.UniqueID()
	if err != nil {
		t.Fatal(err)
	}
	if a == b || a == (UniqueID{}) {
		t.Errorf("two unique ids are equal or zero: %x", a[:24])
	}
}

func TestInitRankErrorCarriesNCCLCodeAndStrings(t *testing.T) {
	// rank == nranks: NCCL (and the shim) refuse it locally, before any collective.
	comm, err := shim.InitRank(UniqueID{}, 2, 2)
	if err == nil {
		comm.Destroy()
		t.Fatal("InitRank(rank 2 of 2) succeeded")
	}
	e := asError(t, err)
	if e.Call != "ncclCommInitRank" || e.Code != InvalidArgument {
		t.Errorf("error call %q code %v, want ncclCommInitRank ncclInvalidArgument", e.Call, e.Code)
	}
	// The message is the library's (ncclshim's strings start with "ncclshim: "), the detail its
	// last error.
	if e.Message != "ncclshim: invalid argument" || e.Message != shim.ErrorString(InvalidArgument) {
		t.Errorf("message %q, want ncclshim's string for ncclInvalidArgument", e.Message)
	}
	if e.Detail != "ncclCommInitRank: rank 2 outside [0, 2)" {
		t.Errorf("detail %q, want ncclshim's last error", e.Detail)
	}
	if !errors.Is(err, InvalidArgument) || errors.Is(err, InvalidUsage) {
		t.Errorf("errors.Is does not match the code %v", e.Code)
	}
	for _, want := range []string{"ncclCommInitRank", "ncclshim: invalid argument", "(ncclInvalidArgument = 4)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestErrorStringIsTheLibrarys(t *testing.T) {
	for code, want := range map[Result]string{
		Success:            "ncclshim: no error",
		SystemError:        "ncclshim: unhandled system error",
		InvalidUsage:       "ncclshim: invalid usage",
		Result(99):         "ncclshim: unknown result code",
		UnhandledCudaError: "ncclshim: unhandled cuda error",
	} {
		if got := shim.ErrorString(code); got != want {
			t.Errorf("ErrorString(%v) = %q, want %q", code, got, want)
		}
	}
}

// TestCloseKeepsTheLibraryMapped: a closed library stays loaded (RTLD_NODELETE), because NVIDIA's
// NCCL leaves threads running after its last communicator, whose code an unmap would pull from
// under them; loading it again works.
func TestCloseKeepsTheLibraryMapped(t *testing.T) {
	lib, err := Load(legacyPath)
	if err != nil {
		t.Fatal(err)
	}
	lib.Close()
	if !isMapped(legacyPath) {
		t.Fatalf("%s was unmapped by Close", legacyPath)
	}
	again, err := Load(legacyPath)
	if err != nil {
		t.Fatal(err)
	}
	again.Close()
}
