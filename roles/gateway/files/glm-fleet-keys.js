// glm.fleet gateway: the SHA-256 (hex) of the key a request presents, as nginx's maps of the
// developers' keys hold it (the gateway never holds a key). The key is the x-api-key header's, or
// the token of an Authorization: Bearer header (the scheme's name in any case, RFC 9110); none or
// anything else gives "", which no map holds.
import crypto from 'crypto';

function presented(r) {
    var apiKey = r.headersIn['X-Api-Key'];
    if (apiKey) {
        return apiKey;
    }
    var match = /^bearer ([A-Za-z0-9_-]+)$/i.exec(r.headersIn['Authorization'] || '');
    return match ? match[1] : '';
}

function sha256(r) {
    var key = presented(r);
    return key ? crypto.createHash('sha256').update(key).digest('hex') : '';
}

export default {sha256};
