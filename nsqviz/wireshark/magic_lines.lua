-- ---------------------------------------------------------------------------------
-- What NSQ's two line protocols (V2 to nsqd, V1 to nsqlookupd) share, both opened by a
-- 4-byte MAGIC: which side is the client, nsqd's naming rule for topics and channels.
-- The generator puts it into those two dissectors only.
-- ---------------------------------------------------------------------------------

-- is name a valid topic or channel name? 1 to max_len bytes of [.a-zA-Z0-9_-], the
-- optional suffix (#ephemeral) not on its own
local function valid_name(name, suffix, max_len)
  local base = name
  if #suffix > 0 and name:sub(-#suffix) == suffix then
    base = name:sub(1, -#suffix - 1)
  end
  return #name >= 1 and #name <= max_len and #base >= 1
         and base:find("^[%.a-zA-Z0-9_%-]+$") ~= nil
end

-- TCP's record of the connection's handshake (a bit each: SYN 1, SYN-ACK 2, ...), where
-- this Wireshark has it
local ok_completeness, f_completeness = pcall(Field.new, "tcp.completeness")

-- Did the capture see the connection open (its SYN or SYN-ACK), as nsqviz's flow
-- tracker asks? Then its first payload is its client's first bytes.
local function opening_seen()
  local c = ok_completeness and f_completeness() or nil
  return c ~= nil and c.value % 4 ~= 0
end

-- Is the sender of s, a connection's first payload (in tvb, pinfo), its client? Yes if
-- it sent the magic (or its start: the connection is seen from its first byte) or
-- talks to a server port, no if a server port talks; nil when neither tells. Then:
-- whether s is the client's first bytes -- the magic, or on a server port whatever a
-- client sent first on a connection seen from its opening (a magic the server refuses).
-- (The side hook of the stream engine's conversation_of.)
local function magic_side(tvb, pinfo, s)
  if MAGIC:sub(1, math.min(#s, #MAGIC)) == s:sub(1, #MAGIC) then return true, true end
  if is_server_port(pinfo.dst_port) then return true, opening_seen() end
  if is_server_port(pinfo.src_port) then return false, false end
  return nil, false
end
