-- wrk script: stateless MCP `tools/call` of `get_order` over kept-alive
-- HTTP/1.1 connections, the request bench/http/keepalive.py sends: the same
-- headers, the same body, protocol 2026-07-28 in the headers and in the
-- call's _meta, which makes the request stateless (no initialize, no
-- session). rmcp's StreamableHttpService and `orders mcp --http` both serve
-- it as it is.
--
--     wrk -t 1 -c 50 -d 15s --latency -s bench/http/tools_call.lua \
--         http://127.0.0.1:8808/mcp
--
-- `orders mcp` serves each stateless request in a conversation of its own
-- when the call names none, so no step budget or loop guard ends the run.
-- With the argument `named` (`... -- named [RUNTAG]`) each call names a
-- fresh conversation in its _meta (`toolcall/conversation`), as
-- keepalive.py did until 2026-12-03: `orders mcp` now refuses a caller's
-- 65th new name within an hour (INVALID_ARGUMENTS, a tool error result,
-- nothing run), so that body measures refusals after 64 calls; the checks
-- below count them.
--
-- Every answer is checked (wrk's `response` callback): it must be HTTP 200
-- and hold a JSON-RPC result that is a successful tool result
-- (`"isError":false`, the order read). Anything else is counted, so a
-- server that answers errors fast does not look fast. The last line printed
-- is one JSON object: the answers, the good ones, those that were not 200,
-- those 200 but not a successful result, wrk's socket errors and timeouts,
-- the calls per second of good answers only, and the latency percentiles
-- (microseconds, wrk's, of every answer).

local threads = {}
local next_id = 1

function setup(thread)
   thread:set("id", next_id)
   table.insert(threads, thread)
   next_id = next_id + 1
end

function init(args)
   named = args[1] == "named"
   tag = args[2] or tostring(os.time())
   n = 0
   good = 0
   non200 = 0
   not_ok = 0
   sample = ""
   local host = wrk.host
   if wrk.port then host = host .. ":" .. wrk.port end
   head = "POST " .. wrk.path .. " HTTP/1.1\r\n"
      .. "Host: " .. host .. "\r\n"
      .. "Content-Type: application/json\r\n"
      .. "Accept: application/json, text/event-stream\r\n"
      .. "MCP-Protocol-Version: 2026-07-28\r\n"
      .. "Mcp-Method: tools/call\r\n"
      .. "Mcp-Name: get_order\r\n"
      .. "Content-Length: "
   prefix = tag .. "-" .. id .. "-"
end

-- keepalive.py's body, key for key (json.dumps with its default separators).
local body_start = '{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": '
   .. '{"name": "get_order", "arguments": {"order_id": "ORD-1001"}, "_meta": '
   .. '{"io.modelcontextprotocol/protocolVersion": "2026-07-28", '
   .. '"io.modelcontextprotocol/clientInfo": {"name": "keepalive", "version": "1"}, '
   .. '"io.modelcontextprotocol/clientCapabilities": {}'
local body_format = body_start .. '}}}'
local body_format_named = body_start .. ', "toolcall/conversation": "bench-%s%d"}}}'

function request()
   n = n + 1
   local body
   if named then
      body = string.format(body_format_named, n, prefix, n)
   else
      body = string.format(body_format, n)
   end
   return head .. #body .. "\r\n\r\n" .. body
end

local find = string.find

function response(status, headers, body)
   if status ~= 200 then
      non200 = non200 + 1
      if sample == "" then sample = status .. ": " .. string.sub(body or "", 1, 300) end
   elseif body == nil
      or not find(body, '"result":', 1, true)
      or not find(body, '"isError":false', 1, true)
      or not find(body, '"ORD-1001"', 1, true)
   then
      not_ok = not_ok + 1
      if sample == "" then sample = status .. ": " .. string.sub(body or "", 1, 300) end
   else
      good = good + 1
   end
end

local function json_string(text)
   text = string.gsub(text, '[%c"\\]', function(c)
      return string.format("\\u%04x", string.byte(c))
   end)
   return '"' .. text .. '"'
end

function done(summary, latency, requests)
   local g, bad200, bad, first = 0, 0, 0, ""
   for _, thread in ipairs(threads) do
      g = g + thread:get("good")
      bad200 = bad200 + thread:get("non200")
      bad = bad + thread:get("not_ok")
      local s = thread:get("sample")
      if first == "" and s ~= "" then first = s end
   end
   local seconds = summary.duration / 1e6
   local e = summary.errors
   io.write(string.format(
      '{"answers": %d, "good": %d, "non_200": %d, "not_ok": %d, '
         .. '"socket_errors": %d, "timeouts": %d, "seconds": %.3f, '
         .. '"calls_per_s": %d, "p50_us": %d, "p99_us": %d, "first_bad": %s}\n',
      summary.requests, g, bad200, bad,
      e.connect + e.read + e.write, e.timeout, seconds,
      math.floor(g / seconds + 0.5),
      latency:percentile(50.0), latency:percentile(99.0), json_string(first)))
end
