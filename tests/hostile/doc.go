// Package hostile is a regression suite of hostile inputs to the built
// staticpodd binary: image archives that try to write or link outside the
// store, manifests that try to exhaust, hang or leak through the daemon, and
// images whose content tries to reach the host when a container is made from
// them. Every case checks both what the product says (the exit status and
// message of `images import` and `validate`, the problems and pod status the
// daemon reports) and that nothing on the host outside the store or the pod
// changed: canary files with known content are planted where an escape would
// land and compared before and after.
//
// The tests run as root with the binary and image of tests/testdaemon; see
// docs/security.md for the promises they hold the product to.
package hostile
