-- ---------------------------------------------------------------------------------
-- The stream engine every nsqviz dissector shares (each generated file carries it:
-- Wireshark loads every Lua file on its own). It knows no protocol: it reads
-- SERVER_PORTS and the fields F above, and the protocol's engine below hands it the
-- Proto and the hooks that frame, resynchronise and dissect.
--
-- One TCP connection = one pair of endpoints, whose record (made by the protocol's
-- engine) holds which side is the client and each direction's state; walk() follows
-- one direction as a stream: several PDUs per segment, PDUs split over segments
-- through pinfo.desegment_offset/desegment_len, undecodable bytes skipped up to where
-- the framing rule can start again, PDUs cut short by the capture's snaplen.
-- ---------------------------------------------------------------------------------

local conversations = {}
local info_frame = nil  -- the packet whose Info column a dissector of this file wrote last
-- Wireshark calls init() when a file is opened and again between tshark -2's passes;
-- the state is dropped only when packets are dissected afresh (not yet visited), so
-- that a second pass still finds what the first recorded.
local fresh = true

local function be32(s, pos)  -- pos is 1-based; signed
  local a, b, c, d = s:byte(pos, pos + 3)
  local v = ((a * 256 + b) * 256 + c) * 256 + d
  if v >= 2147483648 then v = v - 4294967296 end
  return v
end

local function is_server_port(port)
  for _, p in ipairs(SERVER_PORTS) do if p == port then return true end end
  return false
end

local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end

-- every field of F once (a field may stand under several keys)
local function register_fields(proto)
  local list, seen = {}, {}
  for _, f in pairs(F) do
    if not seen[f] then seen[f] = true; list[#list + 1] = f end
  end
  proto.fields = list
end

-- The record of this packet's connection, made on its first payload: side(tvb, pinfo, s)
-- says from the first bytes s (at most ``peek`` of them) whether the source is the
-- client (nil: the connection is not the protocol's) and a value of its own, which
-- make(src_is_client, value) builds the record from (its state per direction, c2s and
-- s2c, and what the protocol pairs). One connection = one pair of endpoints: field
-- extractors such as tcp.stream are empty in a first pass without a tree, as tshark -2
-- and the GUI run it.
local function conversation_of(tvb, pinfo, peek, side, make)
  if fresh and not pinfo.visited then
    conversations = {}
    fresh = false
  end
  local a = tostring(pinfo.src) .. ":" .. pinfo.src_port
  local b = tostring(pinfo.dst) .. ":" .. pinfo.dst_port
  local id = a < b and (a .. " " .. b) or (b .. " " .. a)
  local conv = conversations[id]
  if conv ~= nil then return conv.ours and conv or nil end
  local cap = tvb:len()
  if cap == 0 then return nil end
  local src_is_client, value = side(tvb, pinfo, tvb:raw(0, math.min(cap, peek)))
  if src_is_client == nil then
    conversations[id] = {ours = false}
    return nil
  end
  conv = make(src_is_client, value)
  conv.ours = true
  conv.client = src_is_client and a or b
  conv.calls = {}
  conversations[id] = conv
  return conv
end

-- This packet's direction and that direction's state as the call starts: the live
-- state on the first pass, a copy of what it was then when Wireshark dissects the
-- packet again.
local function direction_state(tvb, pinfo, conv)
  local src = tostring(pinfo.src) .. ":" .. pinfo.src_port
  local dir = src == conv.client and "c2s" or "s2c"
  local key = pinfo.number .. ":" .. tvb:reported_len() .. ":" .. dir
  if not pinfo.visited then
    conv.calls[key] = copy(conv[dir])
    return dir, conv[dir]
  end
  return dir, copy(conv.calls[key] or conv[dir])
end

-- The PDUs of one segment, for one direction's state st. The hooks h:
--   measure(st, s, off, cap) -> length | nil, bytes still needed (if known)
--                              | false, problem... (cannot be framed)
--   resync(st, s, pos, cap)  -> where framing can start again after pos, or nil
--   restart(st, s, off, cap) -> where a stalled stream's framing starts again, or nil
--   undecodable(tree, range, st, how) -> the subtree for bytes that are not PDUs, how:
--                              "refused" (framing failed here) or "continued"
--   refused(t, st, summaries, at, problem...) -> says in t why they could not be framed
--                              (at: {conv, pinfo, off, live} of where they start)
--   dissect(tvb, s, off, len, tree, pinfo, conv, st, live, summaries), live: a first pass
-- and, where the protocol has them: opaque(tree, tvb, off, cap, st, summaries) -> true
-- when the rest of the stream is no longer the protocol (shown there), stalled(st, s,
-- cap) noting the end of a segment the stream stalled in, cut(tree, tvb, off, cap, len,
-- pinfo, conv, st, live, summaries) for a PDU cut by the snaplen at cap (len: its
-- length, when known) and pdu(tree, range, st) for the subtree of
-- its rest in the next segments, dead(tree, range, st) for what follows an
-- unrecoverable start.
local function walk(tvb, pinfo, tree, conv, st, h, summaries)
  local cap, rep = tvb:len(), tvb:reported_len()
  local s = tvb:raw(0, cap)
  local off = 0
  while off < rep do
    if st.dead then  -- also in the segments after the one it died in
      if off < cap then h.dead(tree, tvb(off, cap - off), st) end
      return
    end
    if h.opaque and h.opaque(tree, tvb, off, cap, st, summaries) then return end
    if st.stalled then
      local nxt = h.restart(st, s, off, cap)
      local stop = nxt or cap
      if stop > off then h.undecodable(tree, tvb(off, stop - off), st, "continued") end
      off = stop
      if not nxt then
        if h.stalled then h.stalled(st, s, cap) end
        return
      end
      st.stalled = false
    elseif (st.skip or 0) > 0 then  -- the rest of a PDU the snaplen cut
      local n = math.min(st.skip, rep - off)
      if off < cap then
        local t = h.pdu(tree, tvb(off, math.min(n, cap - off)), st)
        t:add(F["skipped"], tvb(off, math.min(n, cap - off)))
      end
      st.skip = st.skip - n
      off = off + n
    else
      if off >= cap then  -- the rest of this segment was not captured (snaplen)
        st.resyncing = true
        return
      end
      local len, p1, p2, p3 = h.measure(st, s, off, cap)
      if len == false then
        local nxt = h.resync(st, s, off + 1, cap)
        local stop = nxt or cap
        local t = h.undecodable(tree, tvb(off, stop - off), st, "refused")
        h.refused(t, st, summaries,
                  {conv = conv, pinfo = pinfo, off = off, live = not pinfo.visited}, p1, p2, p3)
        off = stop
        if not nxt then
          -- no boundary in this segment: undecodable until the framing rule finds one
          st.stalled = true
          if h.stalled then h.stalled(st, s, cap) end
          return
        end
      elseif len == nil or off + len > cap then
        if cap < rep and h.cut then
          -- a PDU cut by the snaplen: lost; its length, when known, proves where the
          -- next one starts
          h.cut(tree, tvb, off, cap, len, pinfo, conv, st, not pinfo.visited, summaries)
          if len and off + len >= rep then
            st.skip = off + len - rep
          else
            st.resyncing = true
          end
          return
        end
        pinfo.desegment_offset = off
        pinfo.desegment_len = len and (off + len - cap) or p1 or DESEGMENT_ONE_MORE_SEGMENT
        return
      else
        h.dissect(tvb, s, off, len, tree, pinfo, conv, st, not pinfo.visited, summaries)
        off = off + len
      end
    end
  end
end

-- The Info column: the PDUs' summaries after an arrow for the direction. TCP may hand
-- one packet over twice (a reassembled PDU, then the rest): the second call's text
-- follows the first's.
local function show_info(pinfo, dir, info)
  local text = (dir == "c2s" and "\226\134\146 " or "\226\134\144 ") .. info
  if info_frame == pinfo.number then text = " | " .. text end
  info_frame = pinfo.number
  pinfo.cols.info = text
end

-- The dissector ``proto``: p.conversation(tvb, pinfo) -> this packet's connection (nil:
-- not the protocol's); walk() with p.hooks[dir]; p.info(summaries) -> the Info column's
-- text; p.column the Protocol column. It runs on the server ports, and anywhere else on
-- a connection whose first payload p.conversation accepts (p.looks: a quicker test of
-- a packet before it); init() lets the next pass start afresh.
local function serve(proto, p)
  function proto.init()
    fresh = true
  end
  function proto.dissector(tvb, pinfo, tree)
    local conv = p.conversation(tvb, pinfo)
    if not conv then return 0 end
    local cap = tvb:len()
    if cap == 0 then return 0 end
    local dir, st = direction_state(tvb, pinfo, conv)
    pinfo.cols.protocol = p.column
    local summaries = {}
    walk(tvb, pinfo, tree, conv, st, p.hooks[dir], summaries)
    if #summaries > 0 then show_info(pinfo, dir, p.info(summaries)) end
    return cap
  end
  proto:register_heuristic("tcp", function(tvb, pinfo, tree)
    if p.looks and not p.looks(tvb) then return false end
    if not p.conversation(tvb, pinfo) then return false end
    pinfo.conversation = proto
    proto.dissector(tvb, pinfo, tree)
    return true
  end)
  local ports = DissectorTable.get("tcp.port")
  for _, port in ipairs(SERVER_PORTS) do ports:add(port, proto) end
end
