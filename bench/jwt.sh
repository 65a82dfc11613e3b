# bench/jwt.sh — sourced by bench/run: the material of the JWT-mode create row.
#
# jwt_setup DIR: an RS256 key pair in DIR, its public key as the JWKS file DIR/jwks.json (kid
# "bench"), and in JWT_TOKEN a token for bench-sender valid for a day, signed with it.
jwt_b64u() { basenc -w0 --base64url | tr -d '='; }
jwt_setup() {
    local dir=$1 n h p s
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$dir/jwt.key" 2>/dev/null ||
        return 1
    n=$(openssl rsa -in "$dir/jwt.key" -noout -modulus | sed 's/^Modulus=//' | xxd -r -p | jwt_b64u)
    printf '{"keys": [{"kty": "RSA", "kid": "bench", "alg": "RS256", "use": "sig", "n": "%s", "e": "AQAB"}]}\n' \
        "$n" >"$dir/jwks.json"
    h=$(printf '{"alg":"RS256","typ":"JWT","kid":"bench"}' | jwt_b64u)
    p=$(printf '{"sub":"bench-sender","exp":%d}' $(($(date +%s) + 86400)) | jwt_b64u)
    s=$(printf '%s.%s' "$h" "$p" | openssl dgst -sha256 -sign "$dir/jwt.key" -binary | jwt_b64u)
    JWT_TOKEN="$h.$p.$s"
}
