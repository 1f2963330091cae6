-- ---------------------------------------------------------------------------------
-- The TubeMQ engine: framing (MsgToken, serialNo, listSize, blocks) as hooks of the
-- stream engine's walk(), the content's three varint-delimited protobuf messages handed to
-- Wireshark's protobuf dissector by name, request/answer pairing by serialNo. It reads
-- the generated tables above (METHODS, SERVICES, PB, LIMITS, the violation codes V ...)
-- and the fields F; it types no method, service or violation code of its own.
-- ---------------------------------------------------------------------------------

local ef_violation = ProtoExpert.new("tubemq.expert.violation", "TubeMQ protocol violation",
                                     expert.group.PROTOCOL, expert.severity.ERROR)
tubemq.experts = {ef_violation}

register_fields(tubemq)

local pb_dissector = Dissector.get("protobuf")

-- ------------------------------------------------------------------------ framing

-- -> length | nil, more (bytes still needed, at least) | false, code, field, reason
local function measure(st, s, off, cap)
  local avail = cap - off
  local n = math.min(avail, #TOKEN)
  if s:sub(off + 1, off + n) ~= TOKEN:sub(1, n) then
    return false, V.BAD_TOKEN, "MsgToken", "expected " .. Struct.tohex(TOKEN, true) .. ", got "
           .. Struct.tohex(s:sub(off + 1, off + n), true)
  end
  if avail < HEADER_SIZE then return nil, HEADER_SIZE - avail end
  local count = be32(s, off + 9)
  if count < 0 or count > LIMITS.max_list_size then
    return false, V.BAD_LIST_SIZE, "listSize", count .. " is outside 0.." .. LIMITS.max_list_size
  end
  local pos = off + HEADER_SIZE
  for i = 0, count - 1 do
    if cap - pos < 4 then return nil, pos + 4 - cap end
    local len = be32(s, pos + 1)
    if len < LIMITS.min_block_length or len > LIMITS.max_block_length then
      return false, V.BAD_BLOCK_LENGTH, "block[" .. i .. "].length",
             len .. " is outside " .. LIMITS.min_block_length .. ".." .. LIMITS.max_block_length
    end
    pos = pos + 4 + len
    if pos > cap then return nil, pos - cap + (i < count - 1 and 4 or 0) end
  end
  return pos - off
end

-- the next MsgToken after a bad one: a guess, as the codec's resynchronisation is
local function resync(st, s, pos, cap)
  local at = s:find(TOKEN, pos + 1, true)
  return at and at - 1 or nil
end

-- ------------------------------------------------------------------------ protobuf

local function varint(s, i, j)
  local v, mul = 0, 1
  for k = i, math.min(j, i + 9) do
    local b = s:byte(k)
    v = v + (b % 128) * mul
    if b < 128 then return v, k + 1, k + 1 - i end
    mul = mul * 128
  end
  return nil
end

-- the top-level fields of a serialized message s[i..j]: number -> {value} or {start, len}
local function pb_scan(s, i, j)
  local out = {}
  while i <= j do
    local key
    key, i = varint(s, i, j)
    if not key then return nil end
    local number, wire = math.floor(key / 8), key % 8
    if wire == 0 then
      local v
      v, i = varint(s, i, j)
      if not v then return nil end
      out[number] = {value = v}
    elseif wire == 2 then
      local len
      len, i = varint(s, i, j)
      if not len or i + len - 1 > j then return nil end
      out[number] = {start = i, len = len}
      i = i + len
    elseif wire == 1 then i = i + 8
    elseif wire == 5 then i = i + 4
    else return nil end
  end
  if i ~= j + 1 then return nil end
  return out
end

local function pb_value(fields, message, name)
  local f = fields and fields[PB[message][name]]
  return f and f.value
end

-- a length-delimited field ({start, len}), nil when absent or of another wire type
local function pb_bytes(fields, message, name)
  local f = fields and fields[PB[message][name]]
  return f and f.start and f or nil
end

-- Wireshark's protobuf dissector, told the message's name; a message it finds
-- malformed is marked by it, and does not stop the frames after it
local function show_message(tree, content, start, len, name, pinfo)
  pinfo.private["pb_msg_type"] = "message," .. name
  local ok = pcall(Dissector.call, pb_dissector, content(start, len):tvb(), pinfo, tree)
  if not ok then tree:add(content(start, len), name .. ": malformed (protobuf dissector)") end
end

-- ------------------------------------------------------------------------ frames

local function violation(t, problems, code, field, reason)
  problems[#problems + 1] = code
  local v = t:add(F["violation"], code)
  v:add(F["violation.field"], field)
  v:add(F["violation.reason"], reason)
  v:add_proto_expert_info(ef_violation, code .. " (" .. field .. "): " .. reason)
end

local function dissect_frame(tvb, s, off, len, tree, pinfo, conv, st, live, summaries)
  local dir = st.dir
  local t = tree:add(tubemq, tvb(off, len))
  t:add(F["dir"], dir):set_generated()
  local problems = {}
  local serial = tvb(off + 4, 4):uint()
  local count = be32(s, off + 9)
  t:add(F["token"], tvb(off, 4))
  t:add(F["serial"], tvb(off + 4, 4))
  t:add(F["list_size"], tvb(off + 8, 4))
  local content_bytes = ByteArray.new()
  local pos = off + HEADER_SIZE
  for i = 0, count - 1 do
    local n = be32(s, pos + 1)
    local b = t:add(F["block"], tvb(pos, 4 + n))
    b:set_text("Block " .. i .. ": " .. n .. " bytes")
    b:add(F["block.length"], tvb(pos, 4))
    if n > 0 then content_bytes:append(tvb(pos + 4, n):bytes()) end
    pos = pos + 4 + n
  end
  local key = pinfo.number .. ":" .. off
  if content_bytes:len() == 0 then
    violation(t, problems, V.INCOMPLETE, "content", "the content ends early (0 bytes)")
    summaries[#summaries + 1] = "[Incomplete]"
    return
  end
  local content = content_bytes:tvb("TubeMQ content")
  local c = content:raw()
  local clen = #c
  -- the content: three varint-length-delimited messages
  local parts, i = {}, 1
  for k = 1, 3 do
    local mlen, j, width = varint(c, i, clen)
    if not mlen then
      violation(t, problems, i > clen and V.INCOMPLETE or V.BAD_CONTENT, "content",
                "no length varint for message " .. k)
      summaries[#summaries + 1] = "[BadContent]"
      return
    end
    if width > 1 and mlen < 128 ^ (width - 1) then
      violation(t, problems, V.BAD_CONTENT, "content", "length varint is not minimal")
      summaries[#summaries + 1] = "[BadContent]"
      return
    end
    if j + mlen - 1 > clen then
      violation(t, problems, V.INCOMPLETE, "content", "the content ends early (" .. clen .. " bytes)")
      summaries[#summaries + 1] = "[Incomplete]"
      return
    end
    parts[k] = {start = j, len = mlen}
    i = j + mlen
  end
  if i <= clen then
    violation(t, problems, V.TRAILING_BYTES, "content", (clen - i + 1) .. " bytes after the content")
    summaries[#summaries + 1] = "[TrailingBytes]"
    return
  end
  local function scan(k, message)
    local p = parts[k]
    local fields = pb_scan(c, p.start, p.start + p.len - 1)
    show_message(t, content, p.start - 1, p.len, message, pinfo)
    if not fields then
      violation(t, problems, V.PROTOBUF_ERROR, message, message .. " does not parse")
    end
    return fields
  end
  local conn = scan(1, ENVELOPE.conn)
  local flag = pb_value(conn, ENVELOPE.conn, "flag")
  if flag ~= nil then t:add(F["flag"], flag):set_generated() end
  local label
  if dir == "c2s" then
    local header = scan(2, ENVELOPE.request_header)
    local body = scan(3, ENVELOPE.request_body)
    if not (conn and header and body) then return end
    local service = pb_value(header, ENVELOPE.request_header, "serviceType")
    local ver = pb_value(header, ENVELOPE.request_header, "protocolVer")
    local method = pb_value(body, ENVELOPE.request_body, "method")
    local timeout = pb_value(body, ENVELOPE.request_body, "timeout")
    if service then t:add(F["service"], service):set_generated() end
    if ver then t:add(F["protocol_ver"], ver):set_generated() end
    if method then t:add(F["method"], method):set_generated() end
    if timeout then t:add(F["timeout"], UInt64.new(timeout)):set_generated() end
    local info = method and METHODS[method]
    if live and conv.pending[serial] then conv.duplicate[key] = true end
    if conv.duplicate[key] then
      violation(t, problems, V.DUPLICATE_SERIAL, "serialNo",
                "serialNo " .. serial .. " is already awaiting an answer")
    end
    if service == nil or not SERVICES[service] or service < 1 or service > 3 then
      violation(t, problems, V.UNKNOWN_SERVICE, "RequestHeader.serviceType",
                "service type " .. tostring(service) .. " has no RPC methods")
    elseif not info then
      violation(t, problems, V.UNKNOWN_METHOD, "RequestBody.method",
                "method id " .. tostring(method) .. " is not defined")
    else
      local ok = false
      for _, sv in ipairs(info.services) do if sv == service then ok = true end end
      if not ok then
        violation(t, problems, V.WRONG_SERVICE, "RequestBody.method",
                  info.name .. " (" .. method .. ") is not accepted under " .. SERVICES[service])
      end
    end
    if info then
      local inner = pb_bytes(body, ENVELOPE.request_body, "request")
      if info.request == nil then
        violation(t, problems, V.NO_DECODER, "RequestBody.method",
                  info.name .. " (" .. method .. ") has no request message")
      elseif inner then
        t:add(F["message"], info.request):set_generated()
        show_message(t, content, inner.start - 1, inner.len, info.request, pinfo)
      else
        violation(t, problems, V.PROTOBUF_ERROR, "RequestBody.request",
                  "no " .. info.request .. " in the request body")
      end
    end
    label = (info and info.name or ("method " .. tostring(method))) .. " request"
    if live and not conv.pending[serial] then
      conv.pending[serial] = {frame = pinfo.number, method = method, time = pinfo.abs_ts,
                              key = key}
    end
    local answered = conv.answered_in[key]
    if answered then t:add(F["response_in"], answered):set_generated() end
  else
    local header = scan(2, ENVELOPE.response_header)
    if not (conn and header) then return end
    local status = pb_value(header, ENVELOPE.response_header, "status")
    local ver = pb_value(header, ENVELOPE.response_header, "protocolVer")
    if status ~= nil then t:add(F["status"], status):set_generated() end
    if ver then t:add(F["protocol_ver"], ver):set_generated() end
    local asked = conv.asked[key]
    if live then
      asked = conv.pending[serial] or false
      conv.pending[serial] = nil
      conv.asked[key] = asked
      if asked then conv.answered_in[asked.key] = pinfo.number end
    end
    if status ~= STATUS_SUCCESS then
      local body = scan(3, ENVELOPE.exception_body)
      if not body then return end
      local name = pb_bytes(body, ENVELOPE.exception_body, "exceptionName")
      local exception = name and c:sub(name.start, name.start + name.len - 1) or ""
      t:add(F["exception"], exception):set_generated()
      label = (STATUS[status] or tostring(status)) .. " " .. exception
    else
      local body = scan(3, ENVELOPE.response_body)
      if not body then return end
      local method = pb_value(body, ENVELOPE.response_body, "method")
      if method then t:add(F["method"], method):set_generated() end
      if asked and asked.method ~= method then
        violation(t, problems, V.METHOD_MISMATCH, "RspResponseBody.method",
                  "answers method " .. tostring(method) .. ", but request " .. serial
                  .. " called " .. tostring(asked.method))
      end
      local info = method and METHODS[method]
      local data = pb_bytes(body, ENVELOPE.response_body, "data")
      if not info or info.response == nil then
        violation(t, problems, V.UNKNOWN_METHOD, "RspResponseBody.method",
                  "method id " .. tostring(method) .. " has no response message")
      elseif data then
        t:add(F["message"], info.response):set_generated()
        show_message(t, content, data.start - 1, data.len, info.response, pinfo)
      end
      label = (info and info.name or ("method " .. tostring(method))) .. " response"
    end
    if asked then
      t:add(F["request_in"], asked.frame):set_generated()
      local d = pinfo.abs_ts - asked.time
      local secs = math.floor(d)
      t:add(F["time"], NSTime.new(secs, math.floor((d - secs) * 1e9 + 0.5))):set_generated()
    elseif asked == false then
      violation(t, problems, V.RESPONSE_WITHOUT_REQUEST, "serialNo",
                "no request with serialNo " .. serial .. " awaits an answer")
    end
  end
  t:append_text(", " .. label .. ", serial " .. serial)
  local mark = #problems > 0 and (" [" .. table.concat(problems, ",") .. "]") or ""
  summaries[#summaries + 1] = label .. " #" .. serial .. mark
end

-- ------------------------------------------------------------------------ connections

-- Which side is the client, decided once per TCP connection on its first payload: a
-- server port, else the first frame's RpcConnHeader.flag (a request comes from the
-- client).
local function client_side(tvb, pinfo, s)
  if is_server_port(pinfo.dst_port) then return true end
  if is_server_port(pinfo.src_port) then return false end
  if s:sub(1, math.min(#s, #TOKEN)) == TOKEN:sub(1, math.min(#s, #TOKEN)) then
    -- RpcConnHeader is the content's first message: [len][08 flag]
    local flag_at = HEADER_SIZE + 4 + 3
    local flag = #s >= flag_at and s:byte(flag_at) or FLAG_REQUEST
    return flag ~= FLAG_RESPONSE
  end
  return nil
end

local function new_connection()
  return {c2s = {dir = "c2s"}, s2c = {dir = "s2c"},
          pending = {}, asked = {}, answered_in = {}, duplicate = {}}
end

-- The connection of this packet, or nil: not TubeMQ
local function conversation(tvb, pinfo)
  return conversation_of(tvb, pinfo, 64, client_side, new_connection)
end

local HOOKS = {
  measure = measure,
  resync = resync,
  dissect = dissect_frame,
  restart = function(st, s, off, cap)
    return s:sub(off + 1, off + #TOKEN) == TOKEN and off or resync(st, s, off, cap)
  end,
  undecodable = function(tree, range, st, how)
    local t = tree:add(tubemq, range)
    if how == "continued" then
      t:set_text("TubeMQ: undecodable bytes (continued)")
    else
      t:set_text("TubeMQ: undecodable bytes")
      t:add(F["dir"], st.dir):set_generated()
    end
    return t
  end,
  refused = function(t, st, summaries, _, code, field, reason)
    violation(t, {}, code, field, reason)
    summaries[#summaries + 1] = "[" .. code .. "]"
  end,
}

-- the Info column: up to 6 frames one by one, else the first and the last
local function info(summaries)
  if #summaries <= 6 then return table.concat(summaries, ", ") end
  return #summaries .. " frames: " .. summaries[1] .. " ... " .. summaries[#summaries]
end

-- a TubeMQ frame starts with MsgToken
local function starts_with_token(tvb)
  return tvb:len() >= 4 and tvb:raw(0, 4) == TOKEN
end

serve(tubemq, {column = "TubeMQ", conversation = conversation, hooks = {c2s = HOOKS, s2c = HOOKS},
               info = info, looks = starts_with_token})
