package order

// BetweenLines has the lua strategy r run f before each line of a saga.
func BetweenLines(r Reconciler, f func(line int)) { r.(*Lua).betweenLines = f }
