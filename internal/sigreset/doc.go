// Package sigreset gives the children of this process the default action
// for every signal this process inherited ignored, and none blocked.
//
// A program started by nohup ignores SIGHUP, and one started in the
// background by a shell without job control ignores SIGINT and SIGQUIT;
// an ignored signal survives exec, so every command such a program starts
// would ignore them too (Ctrl-C and interrupts would end nothing). Go keeps
// an inherited SIG_IGN for SIGHUP and SIGINT; a signal the runtime catches
// is reset to the default action in the child at exec.
//
// A blocked signal survives exec as well, and a Go program's children
// start with the mask the program started with (perf blocks SIGWINCH), which
// Go offers no way to change: ReexecUnblocked re-executes a helper program
// with an empty mask, and UnblockCmd starts one command through this
// program re-run so.
package sigreset
