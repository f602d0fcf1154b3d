package order

// BetweenLines has the lua strategy r run f before each line of a saga.
func BetweenLines(r Reconciler, f func(line int)) { r.(*Lua).betweenLines = f }

// Home is the bucket of sku that user tries first under the lua strategy r.
func Home(r Reconciler, sku, user string) string { return r.(*Lua).route(sku, user)[0] }
