// Package exec runs processes in running containers, as `runc exec` does:
// the process joins the container through libcontainer, started by an exec
// server that runs the monitor's program (monitor.ExecArg), so that
// libcontainer's init re-executes that program, not the caller's, and that
// serves the execs that follow while they come (Server), so that they pay
// for no process start but the init's. Its standard streams or terminal are
// copied to and from the caller, and a deadline kills it with its process
// group. Each process running is recorded in its container's state
// directory, so that the next daemon kills what a daemon that died left
// (KillLeftovers). Package oci's Runtime finds the container and calls it.
package exec
