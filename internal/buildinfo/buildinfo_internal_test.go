package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestOf(t *testing.T) {
	t.Parallel()
	vcs := func(rev, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"},
			Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}}
	}
	tests := []struct {
		bi   *debug.BuildInfo
		want string
	}{
		{vcs("abc123", "false"), "shop v1.2.3, revision abc123, " + runtime.Version()},
		{vcs("abc123", "true"), "shop v1.2.3, revision abc123-modified, " + runtime.Version()},
		{&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "shop (devel), revision unknown, " + runtime.Version()},
		{nil, "shop unknown, revision unknown, " + runtime.Version()},
	}
	for _, tt := range tests {
		if got := of(tt.bi).String(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.bi, got, tt.want)
		}
	}
}
