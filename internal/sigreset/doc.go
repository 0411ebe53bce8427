// Package sigreset gives the children of this process the default action
// for every signal this process inherited ignored.
//
// A program started by nohup ignores SIGHUP, and one started in the
// background by a shell without job control ignores SIGINT and SIGQUIT;
// an ignored signal survives exec, so every command such a program starts
// would ignore them too (Ctrl-C and interrupts would end nothing). Go keeps
// an inherited SIG_IGN for SIGHUP and SIGINT; a signal the runtime catches
// is reset to the default action in the child at exec.
package sigreset
