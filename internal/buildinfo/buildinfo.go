// Package buildinfo says which build of the shop is running: its module
// version and the VCS revision it was built from, as the Go toolchain
// records them in the binary.
package buildinfo

import (
	"cmp"
	"runtime"
	"runtime/debug"
)

// Info is one build of the shop.
type Info struct {
	Version   string `json:"version"`   // the module version; "(devel)" for a build from a checkout
	Revision  string `json:"revision"`  // the VCS revision, with "-modified" if the tree had changes; "unknown" when not recorded
	GoVersion string `json:"goversion"` // the Go toolchain that built it
}

// Read returns this binary's build information.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return of(bi)
}

// of reads bi, which may be nil.
func of(bi *debug.BuildInfo) Info {
	info := Info{Version: "unknown", Revision: "unknown", GoVersion: runtime.Version()}
	if bi == nil {
		return info
	}
	info.Version = cmp.Or(bi.Main.Version, info.Version)
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified {
		info.Revision += "-modified"
	}
	return info
}

// String is the line that `shop version` prints.
func (i Info) String() string {
	return "shop " + i.Version + ", revision " + i.Revision + ", " + i.GoVersion
}
