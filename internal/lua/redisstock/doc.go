// Package redisstock is the Redis side of the strategy lua: each SKU's
// state, what each user holds, and the stream of reservations the database
// does not have yet, kept by Lua scripts embedded from .lua files
// (reserve, settle, adjust, load, and a cart's lines), each one atomic
// step. Its replies are parsed once, into typed results, where each script
// is called. See docs/strategies.md#the-fast-path-lua.
package redisstock
