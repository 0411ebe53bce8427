package sandboxtest

// stressTests run many calls at once against the provider under test.
// Subtests in other files of this package join a group from an init
// function, e.g. func init() { execTests = append(execTests, ...) }, so each
// concern keeps its tests in its own file.
var stressTests []test
