// A module of its own for the copyright generator, so that its licence
// classifier stays out of the daemon's go.mod (as packaging/nfpm does for
// nfpm). The Makefile runs it with `go -C packaging/copyright run .`.
module github.com/staticpodd/staticpodd/packaging/copyright

go 1.26

require github.com/google/licensecheck v0.3.1
