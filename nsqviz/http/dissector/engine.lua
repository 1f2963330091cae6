-- ---------------------------------------------------------------------------------
-- The HTTP APIs' engine: Wireshark's own HTTP dissector, given the ports of the table
-- above (SERVER_PORTS) besides its own. It dissects nothing itself.
-- ---------------------------------------------------------------------------------

local http = Dissector.get("http")
local tcp_port = DissectorTable.get("tcp.port")
for _, port in ipairs(SERVER_PORTS) do
  tcp_port:add(port, http)
end
