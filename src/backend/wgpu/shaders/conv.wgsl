    let NN = md[1]; let C = md[2]; let H = md[3]; let W = md[4]; let O = md[5];
    let OH = md[6]; let OW = md[7]; let KH = md[8]; let KW = md[9];
    let SH = i32(md[10]); let SW = i32(md[11]); let PT = i32(md[12]); let PL = i32(md[13]);
    let DH = i32(md[14]); let DW = i32(md[15]); let G = md[16];
    let CG = C / G; let OG = O / G;
